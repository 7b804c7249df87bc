#include "rl/trainer/rl_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

#include "rl/trainer/rl_transfer.h"
#include "rl/trainer/role_dispatch.h"
#include "engine/parallel_setup.h"
#include "core/error.h"
#include "core/philox.h"
#include "data/index_permutation.h"
#include "kernels/gemm_choice.h"
#include "model/hf_folder.h"
#include "rl/agg_loss.h"

namespace rf::rl {
namespace {

rl::ActorLossConfig actor_loss_config(const RlConfig& config) {
  rl::ActorLossConfig c = config.actor_rollout_ref.actor.loss;
  c.max_response_length = config.response_length();
  return c;
}

// The rollout's own layout: its TP size over the world, no sequence parallel.
engine::EngineConfig rollout_layout(const RolloutSection& rollout) {
  engine::EngineConfig layout;
  layout.tensor_model_parallel_size = rollout.tensor_model_parallel_size;
  layout.dtype = rollout.dtype;
  return layout;
}

engine::rollout::RolloutConfig rollout_config(const RlConfig& config) {
  const RolloutSection& r = config.actor_rollout_ref.rollout;
  engine::rollout::RolloutConfig c;
  c.block_size = r.block_size;
  c.kv_cache_bytes = r.kv_cache_bytes;
  c.gpu_memory_utilization = r.gpu_memory_utilization;
  c.device_memory_bytes = int64_t(config.resources.device_memory_gb * double(int64_t(1) << 30));
  c.enable_prefix_caching = r.enable_prefix_caching;
  c.limits.max_num_seqs = r.max_num_seqs;
  c.limits.max_num_batched_tokens = r.max_num_batched_tokens;
  c.limits.enable_chunked_prefill = r.enable_chunked_prefill;
  c.limits.max_model_len = config.prompt_length() + config.response_length();
  return c;
}

// A role's parallel context over its ranks (a placeholder single-process context on the others, which
// build no engine for it).
template <class Role>
dist::ParallelContext role_context(const engine::EngineConfig& layout, Role& role) {
  if (!role.member()) return dist::ParallelContext::single_process();
  return engine::make_parallel_context(layout, role.group());
}

rl::CriticLossConfig critic_loss_config(const RlConfig& config) {
  return {.loss_agg_mode = config.critic_loss_agg_mode(),
          .cliprange_value = config.critic.cliprange_value,
          .max_response_length = config.response_length()};
}

// A role's micro-batch cut: `micro` responses (null: its DP share of a mini-batch of
// `mini_batch_responses` in one), or by tokens up to `max_tokens` with `dynamic` (use_dynamic_bsz).
MicroBatching role_batching(int64_t mini_batch_responses, std::optional<int64_t> micro, bool dynamic,
                            int64_t max_tokens, const dist::ParallelContext& parallel) {
  return {micro.value_or(mini_batch_responses / parallel.dp().size()), dynamic ? max_tokens : 0};
}

// Tokens an engine's micro-batch may hold: `responses` of the longest documents, or the token budget.
int64_t engine_capacity(const MicroBatching& batching, int64_t responses, int64_t longest) {
  return batching.max_tokens > 0 ? std::max(batching.max_tokens, longest) : responses * longest;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// A forward pass's micro-batches over this rank's chunk `mine` (responses only, no loss columns), as the
// engine ran them: `outputs[m]` holds micro-batch m's results for the responses `groups[m]`.
struct PassRun {
  std::vector<std::vector<int64_t>> groups;
  std::vector<engine::TensorMap> inputs, outputs;
};
using EnginePass = std::function<std::vector<engine::TensorMap>(const std::vector<engine::TensorMap>&)>;

PassRun run_micro_batches(const RlBatch& batch, const std::vector<int64_t>& mine, const MicroBatching& batching,
                          dist::ProcessGroup& dp, const EnginePass& engine_pass) {
  PassRun run;
  run.groups = split_micro_batches(batch, mine, batching.responses, batching.max_tokens, dp);
  for (const std::vector<int64_t>& g : run.groups) run.inputs.push_back(make_micro_batch(batch, g, LossColumns::none, false));
  run.outputs = engine_pass(run.inputs);
  return run;
}

// Reads the per-position outputs `name` of a pass back into the responses' per-token `column`.
void read_column(RlBatch& batch, const PassRun& run, const std::string& name, std::vector<float> RlResponse::*column) {
  for (size_t m = 0; m < run.groups.size(); ++m) read_token_column(batch, run.groups[m], run.outputs[m].get(name), column);
}

// The mini-batches of a step's update, epoch after epoch: `mini_batch` responses each, in order or, with
// `shuffle`, in a permutation keyed by (seed, step, epoch), so a resumed run shuffles the same way.
std::vector<std::vector<int64_t>> epoch_mini_batches(int64_t B, int64_t mini_batch, int64_t epochs, bool shuffle,
                                                     uint64_t seed, int64_t step) {
  std::vector<std::vector<int64_t>> mini_batches;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    std::vector<int64_t> order = iota(B);
    if (shuffle) {
      const std::array<uint32_t, 4> key = Philox(seed, uint64_t(step)).block_at(uint64_t(epoch));
      const data::IndexPermutation permutation(uint64_t(B), uint64_t(key[0]) << 32 | key[1]);
      for (int64_t i = 0; i < B; ++i) order[size_t(i)] = int64_t(permutation.forward(uint64_t(i)));
    }
    for (int64_t first = 0; first < B; first += mini_batch)
      mini_batches.emplace_back(order.begin() + first, order.begin() + std::min(B, first + mini_batch));
  }
  return mini_batches;
}

// What differs between the actor's update and the critic's; verl runs the same loop for both.
struct UpdatePass {
  engine::TrainEngine& engine;
  dist::ProcessGroup& dp;
  engine::LossFn loss;
  LossColumns columns;
  bool with_ref;  // the actor's micro-batches carry ref_log_prob
  MicroBatching batching;
  bool balance;  // trainer.balance_batch: balanced DP shares of each mini-batch
  model::EntropyOutput entropy;
  double temperature;
  std::string prefix;  // of grad_norm and lr: actor or critic
};

// A mini-batch's micro-batches on this DP rank: rank r runs the r-th of dp_shares(indices) (train_engine.h:
// the one-rank run of all of it is the reference). The mini-batch is the same at every DP size.
std::vector<engine::TensorMap> dp_micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                                const UpdatePass& pass) {
  const std::vector<int64_t> mine = dp_shares(batch, indices, pass.dp.size(), pass.balance)[size_t(pass.dp.rank())];
  std::vector<engine::TensorMap> result;
  for (const std::vector<int64_t>& group :
       split_micro_batches(batch, mine, pass.batching.responses, pass.batching.max_tokens, pass.dp))
    result.push_back(make_micro_batch(batch, group, pass.columns, pass.with_ref));
  return result;
}

// One role's update on its ranks: each mini-batch through the loss, then one optimizer step; the loss's
// metrics (summed over micro-batches and DP) and <prefix>/grad_norm averaged over the mini-batches,
// <prefix>/lr, and one step of the LR schedule.
Metrics run_update(const RlBatch& batch, const std::vector<std::vector<int64_t>>& mini_batches,
                   const UpdatePass& pass) {
  Metrics sums;
  for (const std::vector<int64_t>& indices : mini_batches) {
    const engine::ForwardBackwardResult fb = pass.engine.forward_backward(
        dp_micro_batches(batch, indices, pass), pass.loss, engine::ForwardOnly::no, pass.entropy, pass.temperature);
    for (const auto& [name, value] : fb.metrics) sums[name] += pass.dp.all_reduce_scalar(value, dist::ReduceOp::sum);
    sums[pass.prefix + "/grad_norm"] += pass.engine.optimizer_step();
  }
  Metrics metrics;
  for (const auto& [name, value] : sums) metrics[name] = value / double(mini_batches.size());
  metrics[pass.prefix + "/lr"] = pass.engine.lr();
  pass.engine.lr_step();
  return metrics;
}

}  // namespace

engine::rollout::RolloutSamplingParams train_sampling(const RolloutSection& rollout, int64_t response_length,
                                                      uint64_t seed) {
  engine::rollout::RolloutSamplingParams p;
  p.temperature = rollout.temperature;
  p.top_k = rollout.top_k;
  p.top_p = rollout.top_p;
  p.do_sample = rollout.do_sample;
  p.n = rollout.n;
  p.max_tokens = response_length;
  p.seed = seed;
  p.ignore_eos = rollout.ignore_eos;
  return p;
}

engine::rollout::RolloutSamplingParams greedy_sampling(const RolloutSection& rollout, int64_t response_length,
                                                       uint64_t seed) {
  engine::rollout::RolloutSamplingParams p = train_sampling(rollout, response_length, seed);
  p.do_sample = false;
  p.n = 1;
  return p;
}

engine::rollout::RolloutSamplingParams val_sampling(const RolloutSection& rollout, int64_t response_length,
                                                    uint64_t seed) {
  engine::rollout::RolloutSamplingParams p = train_sampling(rollout, response_length, seed);
  p.temperature = rollout.val_kwargs.temperature;
  p.top_k = rollout.val_kwargs.top_k;
  p.top_p = rollout.val_kwargs.top_p;
  p.do_sample = rollout.val_kwargs.do_sample;
  p.n = rollout.val_kwargs.n;
  return p;
}

model::HfModelFolder critic_hf_folder(const RlConfig& config) {
  const std::string dir = config.critic_model_path();
  model::HfModelFolder folder = model::HfModelFolder::open(dir);
  const model::ModelConfig& c = folder.config;
  if (c.head == model::HeadKind::score || (c.head == model::HeadKind::value && c.num_labels != 1))
    throw ConfigError("critic.model.path",
                      fmt::format("'{}' is a {} model with {} labels: expected an LM, or a value model "
                                  "(*ForTokenClassification) with one label",
                                  dir, model::head_name(c.head), c.num_labels));
  if (c.head == model::HeadKind::lm) folder.set_head(model::HeadKind::value, 1);
  return folder;
}

RlRoles::RoleRanks::RoleRanks(dist::ProcessGroup& world, const std::vector<int>& ranks, const std::string& name)
    : world_(world), member_(true), root_(0) {
  const bool all = ranks.empty() || int(ranks.size()) == world.size();
  if (all) return;  // no sub-communicator: the role is the world
  ranks_ = ranks;
  member_ = std::find(ranks.begin(), ranks.end(), world.rank()) != ranks.end();
  root_ = ranks.front();
  own_ = world.split(member_ ? 0 : -1, world.rank(), name);
}

bool RlRoles::RoleRanks::contains(const RoleRanks& other) const {
  if (ranks_.empty()) return true;
  if (other.ranks_.empty()) return false;
  return std::includes(ranks_.begin(), ranks_.end(), other.ranks_.begin(), other.ranks_.end());
}

MicroBatching old_log_prob_batching(const RolloutSection& rollout, const MicroBatching& actor) {
  return {rollout.log_prob_micro_batch_size_per_gpu.value_or(actor.responses), actor.max_tokens};
}

RlRoles::RlRoles(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
                 MemoryTracker& tracker, const RolePlacement& placement)
    : config_(config),
      world_(world),
      actor_role_(world, placement.actor, "actor"),
      rollout_role_(world, placement.rollout, "rollout"),
      ref_role_(world, placement.ref.empty() ? placement.actor : placement.ref, "ref"),
      critic_role_(world, placement.critic.empty() ? placement.actor : placement.critic, "critic"),
      reward_model_role_(world, placement.reward_model.empty() ? placement.actor : placement.reward_model,
                         "reward_model"),
      actor_parallel_(role_context(config.actor_rollout_ref.actor.megatron, actor_role_)),
      rollout_parallel_(role_context(rollout_layout(config.actor_rollout_ref.rollout), rollout_role_)),
      ref_parallel_(role_context(config.actor_rollout_ref.ref.megatron, ref_role_)),
      critic_parallel_(config.uses_critic() ? role_context(config.critic.megatron, critic_role_)
                                            : dist::ParallelContext::single_process()),
      reward_model_parallel_(config.reward_model.enable ? role_context(config.reward_model.megatron, reward_model_role_)
                                                        : dist::ParallelContext::single_process()),
      // Deterministic mode: every path batch-invariant (the rollout's always is).
      kernels_(kernels::run_kernel_config(config.trainer.deterministic)),
      rollout_kernels_(kernels::run_kernel_config(true)),
      actor_loss_(actor_loss_config(config)),
      balance_batch_(config.trainer.balance_batch),
      uses_ref_(config.actor_rollout_ref.actor.loss.use_kl_loss || config.algorithm.use_kl_in_reward) {
  const ActorSection& a = config.actor_rollout_ref.actor;
  const RolloutSection& r = config.actor_rollout_ref.rollout;
  actor_batching_ = role_batching(a.ppo_mini_batch_size * r.n, a.ppo_micro_batch_size_per_gpu, a.use_dynamic_bsz,
                                  a.ppo_max_token_len_per_gpu, actor_parallel_);
  const int64_t longest = config.prompt_length() + config.response_length();
  log_prob_batching_ = old_log_prob_batching(r, actor_batching_);
  const int64_t log_prob_responses = log_prob_batching_.responses;
  const int64_t capacity =
      engine_capacity(actor_batching_, std::max(actor_batching_.responses, log_prob_responses), longest);
  temperature_ = train_sampling(r, config.response_length(), 0).logprob_temperature();

  if (actor_role_.member()) {
    optim::OptimConfig optim = a.optim;
    optim.total_training_steps = config.trainer.total_training_steps;
    actor_ = std::make_unique<engine::TrainEngine>(a.megatron, optim, model_config, kernels_, actor_parallel_, tracker,
                                                   capacity);
  }
  if (rollout_role_.member()) {
    const DType rollout_dtype = engine::EngineConfig{.dtype = r.dtype}.compute_dtype();
    // The rollout is the actor's ranks with the actor's TP and compute dtype: it reads the actor's weights
    // in place, so the sync copies nothing and no second copy is resident.
    const bool shares_actor_weights = actor_ && actor_role_.contains(rollout_role_) &&
                                      rollout_role_.contains(actor_role_) &&
                                      r.tensor_model_parallel_size == a.megatron.tensor_model_parallel_size &&
                                      rollout_dtype == actor_->compute_dtype();
    rollout_ = std::make_unique<engine::rollout::RolloutEngine>(
        model_config, rollout_dtype, rollout_config(config), rollout_kernels_, rollout_parallel_, tracker,
        shares_actor_weights ? &actor_->compute_weights() : nullptr);
    // Colocated with training, the KV cache exists only while generating (HybridEngine::enter_generate):
    // released before the other roles' engines take their memory.
    if (r.free_cache_engine) rollout_->release();
  }
  if (uses_ref_ && ref_role_.member())
    ref_ = std::make_unique<engine::InferEngine>(config.actor_rollout_ref.ref.megatron, model_config, kernels_,
                                                 ref_parallel_, tracker, capacity);
  if (config.reward_model.enable) {
    const RewardModelSection& rm = config.reward_model;
    reward_model_batching_ = {rm.micro_batch_size_per_gpu.value_or(log_prob_responses),
                              rm.use_dynamic_bsz.value_or(a.use_dynamic_bsz) ? rm.forward_max_token_len_per_gpu : 0};
    if (reward_model_role_.member())
      reward_model_ = std::make_unique<engine::InferEngine>(
          rm.megatron, model::HfModelFolder::open(*rm.model.path).config, kernels_, reward_model_parallel_, tracker,
          engine_capacity(reward_model_batching_, reward_model_batching_.responses,
                          std::max(longest, rm.max_length.value_or(0))));
  }
  if (config.uses_critic()) {
    critic_loss_.emplace(critic_loss_config(config));
    critic_batching_ = role_batching(config.critic_ppo_mini_batch_size() * r.n, config.critic.ppo_micro_batch_size_per_gpu,
                                     config.critic_use_dynamic_bsz(), config.critic.ppo_max_token_len_per_gpu,
                                     critic_parallel_);
    if (critic_role_.member()) {
      optim::OptimConfig optim = config.critic.optim;
      optim.total_training_steps = config.trainer.total_training_steps;
      critic_ = std::make_unique<engine::TrainEngine>(config.critic.megatron, optim,
                                                      critic_hf_folder(config).config, kernels_,
                                                      critic_parallel_, tracker,
                                                      engine_capacity(critic_batching_, critic_batching_.responses, longest));
    }
  }
  hybrid_ = std::make_unique<HybridEngine>(config, HybridEngine::Engines{.actor = actor_.get(),
                                                                        .rollout = rollout_.get(),
                                                                        .ref = ref_.get(),
                                                                        .critic = critic_.get(),
                                                                        .reward_model = reward_model_.get()},
                                           world, placement.actor, placement.rollout);
}

void RlRoles::load_initial_weights(const std::string& model_dir) {
  if (actor_) actor_->load_hf_weights(model_dir);
  if (ref_) ref_->load_hf_weights(model_dir);
  if (reward_model_) reward_model_->load_hf_weights(*config_.reward_model.model.path);
  if (!critic_) return;
  const std::string critic_dir = config_.critic.model.path.value_or(model_dir);
  if (model::HfModelFolder::open(critic_dir).config.head == model::HeadKind::value)
    critic_->load_hf_weights(critic_dir);
  else
    critic_->load_hf_backbone(critic_dir, config_.critic.megatron.seed);
}

RlBatch RlRoles::generate(std::span<const RlPrompt> prompts, uint64_t request_base,
                          const engine::rollout::RolloutSamplingParams& params, std::span<const int64_t> eos_ids,
                          int64_t num_candidates) {
  // verl's generate_sequences: each rollout replica (its TP group) a contiguous run of the prompts.
  const RoleDispatch dispatch(DispatchMode::megatron_pp_as_dp_proto, rollout_parallel_, rollout_ != nullptr);
  RlBatch local;
  if (dispatch.member()) {
    std::vector<engine::rollout::RolloutRequest> requests;
    for (const int64_t i : dispatch.contiguous_chunk(int64_t(prompts.size())))
      requests.push_back({prompts[size_t(i)].tokens, request_base + uint64_t(i), 0});
    hybrid_->enter_generate();
    std::vector<engine::rollout::RolloutSample> samples = rollout_->generate(requests, params, eos_ids, num_candidates);
    hybrid_->leave_generate();
    local.reserve(samples.size());
    for (engine::rollout::RolloutSample& s : samples) {
      RlResponse r;
      r.group = int64_t(s.request_id - request_base);
      r.prompt = prompts[size_t(r.group)].tokens;
      r.response = std::move(s.token_ids);
      r.truncated = s.finish_reason == engine::FinishReason::length;
      r.rollout_log_probs.assign(s.logprobs.begin(), s.logprobs.end());
      local.push_back(std::move(r));
    }
  }
  // One replica over the whole world (TP over it, or one process): every rank holds every sample.
  if (rollout_role_.everywhere() && dispatch.num_chunks() == 1) return local;
  if (!dispatch.collects()) local.clear();
  return gather_responses(std::move(local), world_);
}

void RlRoles::run_pass(const RoleRanks& role, const RoleDispatch& dispatch, RlBatch& batch, const RlBatch& split_by,
                       const PassOutputs& outputs, const std::function<void(const std::vector<int64_t>&)>& compute) {
  const std::vector<int64_t> all = iota(int64_t(split_by.size()));
  const std::vector<int64_t> mine = dispatch.chunk(split_by, all, balance_batch_);
  if (dispatch.member()) compute(mine);
  if (role.everywhere() && dispatch.num_chunks() == 1) return;  // every rank computed every response
  const std::span<const int64_t> sent = dispatch.collects() ? std::span<const int64_t>(mine) : std::span<const int64_t>();
  if (outputs.scores)
    gather_scores(batch, sent, world_);
  else
    gather_columns(batch, sent, outputs.columns, world_);
}

Metrics RlRoles::compute_log_prob(RlBatch& batch) {
  const RoleDispatch dispatch(DispatchMode::megatron_compute_proto, actor_parallel_, actor_ != nullptr);
  run_pass(actor_role_, dispatch, batch, batch, {{&RlResponse::old_log_probs, &RlResponse::entropy}},
           [&](const std::vector<int64_t>& mine) {
             const PassRun run = run_micro_batches(batch, mine, log_prob_batching_, actor_parallel_.dp(), [&](const auto& mbs) {
               return actor_->compute_log_prob(mbs, temperature_, model::EntropyOutput::compute);
             });
             hybrid_->leave_log_prob();
             read_column(batch, run, "log_probs", &RlResponse::old_log_probs);
             read_column(batch, run, "entropy", &RlResponse::entropy);
           });
  const ActorSection& a = config_.actor_rollout_ref.actor;
  rl::VerlBatchInfo info;
  info.loss_scale_factor = a.loss.loss_scale_factor.value_or(double(config_.response_length()));
  const Tensor entropy_BT = column_matrix(batch, &RlResponse::entropy);
  return {{"actor/entropy",
           rl::agg_loss(entropy_BT, response_mask_matrix(batch), a.loss.loss_agg_mode, info)}};
}

void RlRoles::compute_ref(RlBatch& batch) {
  const RoleDispatch dispatch(DispatchMode::megatron_compute_proto, ref_parallel_, ref_ != nullptr);
  run_pass(ref_role_, dispatch, batch, batch, {{&RlResponse::ref_log_prob}}, [&](const std::vector<int64_t>& mine) {
    MicroBatching batching = log_prob_batching_;
    batching.responses =
        config_.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu.value_or(log_prob_batching_.responses);
    const PassRun run = run_micro_batches(batch, mine, batching, ref_parallel_.dp(), [&](const auto& mbs) {
      return ref_->compute_log_prob(mbs, temperature_, model::EntropyOutput::skip);
    });
    hybrid_->leave_ref();
    read_column(batch, run, "log_probs", &RlResponse::ref_log_prob);
  });
}

void RlRoles::compute_rm_scores(RlBatch& batch, const RlBatch& sequences) {
  const RoleDispatch dispatch(DispatchMode::megatron_compute_proto, reward_model_parallel_, reward_model_ != nullptr);
  run_pass(reward_model_role_, dispatch, batch, sequences, {.columns = {}, .scores = true},
           [&](const std::vector<int64_t>& mine) {
             const PassRun run =
                 run_micro_batches(sequences, mine, reward_model_batching_, reward_model_parallel_.dp(),
                                   [&](const auto& mbs) { return reward_model_->compute_values(mbs); });
             hybrid_->leave_reward_model();
             for (size_t m = 0; m < run.groups.size(); ++m) {
               const Tensor scores_D = engine::last_token_values(run.outputs[m].get("values"), run.inputs[m].cu_seqlens());
               for (size_t d = 0; d < run.groups[m].size(); ++d) {
                 RlResponse& r = batch[size_t(run.groups[m][d])];
                 r.score = scores_D.data<float>()[d];
                 r.reward_extra.clear();
               }
             }
           });
}

void RlRoles::compute_values(RlBatch& batch) {
  const RoleDispatch dispatch(DispatchMode::megatron_compute_proto, critic_parallel_, critic_ != nullptr);
  run_pass(critic_role_, dispatch, batch, batch, {{&RlResponse::values}}, [&](const std::vector<int64_t>& mine) {
    const PassRun run = run_micro_batches(batch, mine, critic_batching_, critic_parallel_.dp(),
                                          [&](const auto& mbs) { return critic_->compute_values(mbs); });
    hybrid_->leave_values();
    read_column(batch, run, "values", &RlResponse::values);
  });
}

// The updates are dispatched ONE_TO_ALL: every rank of the role takes the whole batch and splits each
// mini-batch over its DP ranks itself (dp_micro_batches), so DP never changes what a mini-batch holds; the
// metrics are collected from the role's first rank.
Metrics RlRoles::update_critic(RlBatch& batch, int64_t step) {
  Metrics metrics;
  if (critic_) {
    const int64_t mini_batch = config_.critic_ppo_mini_batch_size() * config_.actor_rollout_ref.rollout.n;
    const UpdatePass pass{*critic_,
                          critic_parallel_.dp(),
                          std::cref(*critic_loss_),
                          LossColumns::critic,
                          false,
                          critic_batching_,
                          balance_batch_,
                          model::EntropyOutput::skip,
                          1.0,
                          "critic"};
    metrics = run_update(batch,
                         epoch_mini_batches(int64_t(batch.size()), mini_batch, config_.critic_ppo_epochs(),
                                            config_.critic_shuffle(), config_.critic_data_loader_seed(), step),
                         pass);
    hybrid_->leave_update_critic();
  }
  if (!critic_role_.everywhere()) broadcast_metrics(metrics, world_, critic_role_.root());
  return metrics;
}

Metrics RlRoles::update_actor(RlBatch& batch, int64_t step) {
  Metrics metrics;
  hybrid_->enter_update_actor();
  if (actor_) {
    const ActorSection& a = config_.actor_rollout_ref.actor;
    const int64_t mini_batch = a.ppo_mini_batch_size * config_.actor_rollout_ref.rollout.n;
    const bool with_entropy = a.loss.entropy_coeff != 0 || a.calculate_entropy;
    const UpdatePass pass{*actor_,
                          actor_parallel_.dp(),
                          std::cref(actor_loss_),
                          LossColumns::actor,
                          ref_ != nullptr,
                          actor_batching_,
                          balance_batch_,
                          with_entropy ? model::EntropyOutput::compute : model::EntropyOutput::skip,
                          temperature_,
                          "actor"};
    metrics = run_update(
        batch, epoch_mini_batches(int64_t(batch.size()), mini_batch, a.ppo_epochs, a.shuffle, a.data_loader_seed, step),
        pass);
  }
  if (!actor_role_.everywhere()) broadcast_metrics(metrics, world_, actor_role_.root());
  return metrics;
}

Metrics RlRoles::sync_weights() { return hybrid_->sync_weights(); }

}  // namespace rf::rl
