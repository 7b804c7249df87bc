#include "rl/trainer/rl_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

#include "rl/trainer/rl_transfer.h"
#include "rl/trainer/role_dispatch.h"
#include "core/error.h"
#include "core/philox.h"
#include "data/index_permutation.h"
#include "engine/local_micro_batch.h"
#include "model/hf_folder.h"
#include "rl/agg_loss.h"

namespace rf::rl {
namespace {

rl::ActorLossConfig actor_loss_config(const RlConfig& config) {
  rl::ActorLossConfig c = config.actor_rollout_ref.actor.loss;
  c.max_response_length = config.response_length();
  return c;
}

rl::CriticLossConfig critic_loss_config(const RlConfig& config) {
  rl::CriticLossConfig c = config.critic.loss;
  c.loss_agg_mode = config.critic_loss_agg_mode();
  c.max_response_length = config.response_length();
  return c;
}

// A role's micro-batch cut: `micro` responses (null: its DP share of a mini-batch of
// `mini_batch_responses` in one), or by tokens up to `max_tokens` with `dynamic` (use_dynamic_bsz).
MicroBatching role_batching(int64_t mini_batch_responses, std::optional<int64_t> micro, bool dynamic,
                            int64_t max_tokens, int64_t dp_size, const engine::EngineConfig& megatron) {
  return {micro.value_or(mini_batch_responses / dp_size), dynamic ? max_tokens : 0, megatron.context_parallel_size};
}

// A role's data-parallel size from its placement alone, the same on every rank: its ranks over TP x PP x CP (its
// pipeline stages and context-parallel ranks share each replica's data).
int64_t role_dp_size(const std::vector<int>& ranks, const dist::ProcessGroup& world, const engine::EngineConfig& megatron) {
  return (ranks.empty() ? int64_t(world.size()) : int64_t(ranks.size())) /
         (megatron.tensor_model_parallel_size * megatron.pipeline_model_parallel_size *
          megatron.context_parallel_size);
}

// Tokens an engine's micro-batch may hold: `responses` of the longest documents, or the token budget (per rank,
// so x CP), each document as context parallel pads it.
int64_t engine_capacity(const MicroBatching& batching, int64_t responses, int64_t longest) {
  const int64_t padded = engine::context_parallel_length(longest, batching.cp_size);
  return batching.max_tokens > 0 ? std::max(batching.max_tokens * batching.cp_size, padded) : responses * padded;
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

// `prepare` (when set) adds to each micro-batch made from its responses (router replay and recording).
using PrepareMicroBatch = std::function<void(engine::TensorMap&, const std::vector<int64_t>&)>;

PassRun run_micro_batches(const RlBatch& batch, const std::vector<int64_t>& mine, const MicroBatching& batching,
                          dist::ProcessGroup& dp, const EnginePass& engine_pass,
                          const PrepareMicroBatch& prepare = {}) {
  PassRun run;
  run.groups = split_micro_batches(batch, mine, batching.responses, batching.max_tokens, batching.cp_size, dp);
  for (const std::vector<int64_t>& g : run.groups) {
    run.inputs.push_back(make_micro_batch(batch, g, LossColumns::none, false));
    if (prepare) prepare(run.inputs.back(), g);
  }
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
  bool skips_non_finite;  // EngineConfig::skips_non_finite_steps: <prefix>/skipped_steps is logged
  std::vector<int32_t> RlResponse::*replay;  // router replay: the routing the micro-batches carry (null: none)
  RoutingShape routing;
};

// A mini-batch's micro-batches on this DP rank: rank r runs the r-th of dp_shares(indices) (train_engine.h:
// the one-rank run of all of it is the reference). The mini-batch is the same at every DP size.
std::vector<engine::TensorMap> dp_micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                                const UpdatePass& pass) {
  const std::vector<int64_t> mine = dp_shares(batch, indices, pass.dp.size(), pass.balance)[size_t(pass.dp.rank())];
  std::vector<engine::TensorMap> result;
  for (const std::vector<int64_t>& group :
       split_micro_batches(batch, mine, pass.batching.responses, pass.batching.max_tokens, pass.batching.cp_size,
                           pass.dp)) {
    result.push_back(make_micro_batch(batch, group, pass.columns, pass.with_ref));
    if (pass.replay)
      add_replay_experts(result.back(), batch, group, pass.replay, pass.routing.num_moe_layers, pass.routing.top_k);
  }
  return result;
}

// One role's update on its ranks: each mini-batch through the loss, then one optimizer step; the loss's
// metrics (summed over micro-batches and DP) and <prefix>/grad_norm averaged over the mini-batches,
// <prefix>/lr, and one step of the LR schedule unless nan_policy skip_step skipped every optimizer step
// (Megatron advances it only on an applied one); with skip_step, <prefix>/skipped_steps (over the run).
Metrics run_update(const RlBatch& batch, const std::vector<std::vector<int64_t>>& mini_batches,
                   const UpdatePass& pass, int64_t step) {
  Metrics sums;
  bool applied = false;
  for (size_t i = 0; i < mini_batches.size(); ++i) {
    const engine::ForwardBackwardResult fb =
        pass.engine.forward_backward(dp_micro_batches(batch, mini_batches[i], pass), pass.loss,
                                     engine::ForwardOnly::no, pass.entropy, pass.temperature);
    for (const auto& [name, value] : fb.metrics) sums[name] += pass.dp.all_reduce_scalar(value, dist::ReduceOp::sum);
    sums[pass.prefix + "/grad_norm"] += pass.engine.optimizer_step(
        fmt::format("step {}, {} update, mini-batch {} of {}", step, pass.prefix, i + 1, mini_batches.size()));
    applied = applied || !pass.engine.last_step_skipped();
  }
  Metrics metrics;
  for (const auto& [name, value] : sums) metrics[name] = value / double(mini_batches.size());
  metrics[pass.prefix + "/lr"] = pass.engine.lr();
  if (applied) pass.engine.lr_step();
  if (pass.skips_non_finite) metrics[pass.prefix + "/skipped_steps"] = double(pass.engine.num_skipped_steps());
  return metrics;
}

}  // namespace

engine::rollout::RolloutSamplingParams train_sampling(const RolloutSection& rollout, int64_t response_length,
                                                      uint64_t seed) {
  engine::rollout::RolloutSamplingParams p = rollout.sampling;
  p.max_tokens = response_length;
  p.seed = seed;
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
  engine::rollout::RolloutSamplingParams p = rollout.val_kwargs;
  p.ignore_eos = rollout.sampling.ignore_eos;
  p.max_tokens = response_length;
  p.seed = seed;
  return p;
}

MicroBatching old_log_prob_batching(const RolloutSection& rollout, const MicroBatching& actor) {
  return {rollout.log_prob_micro_batch_size_per_gpu.value_or(actor.responses), actor.max_tokens, actor.cp_size};
}

RlRoles::RlRoles(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
                 MemoryTracker& tracker, const RolePlacement& placement)
    : config_(config),
      world_(world),
      actor_loss_(actor_loss_config(config)),
      balance_batch_(config.trainer.balance_batch) {
  const ActorSection& a = config.actor_rollout_ref.actor;
  const RolloutSection& r = config.actor_rollout_ref.rollout;
  set_up_router_replay(model_config, placement, world);
  const std::vector<int>& critic_ranks = placement.critic.empty() ? placement.actor : placement.critic;
  actor_batching_ = role_batching(a.ppo_mini_batch_size * r.sampling.n, a.ppo_micro_batch_size_per_gpu, a.use_dynamic_bsz,
                                  a.ppo_max_token_len_per_gpu, role_dp_size(placement.actor, world, a.megatron),
                                  a.megatron);
  const int64_t longest = config.prompt_length() + config.response_length();
  log_prob_batching_ = old_log_prob_batching(r, actor_batching_);
  temperature_ = train_sampling(r, config.response_length(), 0).logprob_temperature();
  HybridEngine::Capacities capacities;
  capacities.actor = engine_capacity(actor_batching_, std::max(actor_batching_.responses, log_prob_batching_.responses),
                                     longest);
  MicroBatching ref_batching = actor_batching_;
  ref_batching.cp_size = config.actor_rollout_ref.ref.megatron.context_parallel_size;
  capacities.ref = engine_capacity(ref_batching, std::max(actor_batching_.responses, log_prob_batching_.responses),
                                   longest);
  if (config.reward_model.enable) {
    const RewardModelSection& rm = config.reward_model;
    reward_model_batching_ = {rm.micro_batch_size_per_gpu.value_or(log_prob_batching_.responses),
                              rm.use_dynamic_bsz.value_or(a.use_dynamic_bsz) ? rm.forward_max_token_len_per_gpu : 0,
                              rm.megatron.context_parallel_size};
    capacities.reward_model = engine_capacity(reward_model_batching_, reward_model_batching_.responses,
                                              std::max(longest, rm.max_length.value_or(0)));
  }
  if (config.uses_critic()) {
    critic_loss_.emplace(critic_loss_config(config));
    critic_batching_ = role_batching(config.critic_ppo_mini_batch_size() * r.sampling.n, config.critic.ppo_micro_batch_size_per_gpu,
                                     config.critic_use_dynamic_bsz(), config.critic.ppo_max_token_len_per_gpu,
                                     role_dp_size(critic_ranks, world, config.critic.megatron), config.critic.megatron);
    capacities.critic = engine_capacity(critic_batching_, critic_batching_.responses, longest);
  }
  hybrid_ = std::make_unique<HybridEngine>(config, model_config, world, tracker, placement, capacities);
}

void RlRoles::set_up_router_replay(const model::ModelConfig& model_config, const RolePlacement& placement,
                                   dist::ProcessGroup& world) {
  const ActorSection& a = config_.actor_rollout_ref.actor;
  replay_mode_ = a.router_replay.mode;
  const std::string key = "actor_rollout_ref.actor.router_replay.mode";
  const std::string mode = replay_mode_ == RouterReplayMode::r2 ? "R2" : "R3";
  if (!model_config.moe.enabled()) {
    if (replay_mode_ != RouterReplayMode::disabled)
      throw ConfigError(key, fmt::format("{}: the model has no MoE layers, so no router to replay", mode));
    return;
  }
  for (int64_t l = 0; l < model_config.num_hidden_layers; ++l)
    routing_.num_moe_layers += model_config.moe.is_moe_layer(l);
  routing_.top_k = model_config.moe.num_experts_per_tok;
  routing_.num_experts = model_config.moe.num_experts;
  routing_.actor_dropless = a.megatron.moe_capacity().dropless();
  // The model records and replays one rank's whole model on unsplit micro-batches (model_inputs.h).
  const engine::EngineConfig& m = a.megatron;
  records_routing_ = m.pipeline_model_parallel_size == 1 && m.context_parallel_size == 1;
  if (replay_mode_ == RouterReplayMode::disabled) return;
  if (!records_routing_)
    throw ConfigError(key, fmt::format("{}: router replay with pipeline_model_parallel_size {} or "
                                       "context_parallel_size {} is not built (1 and 1 only)",
                                       mode, m.pipeline_model_parallel_size, m.context_parallel_size));
  // R2 replays the old-log-prob pass's records, which stay on the actor's rank that made them.
  if (replay_mode_ == RouterReplayMode::r2 && role_dp_size(placement.actor, world, m) > 1)
    throw ConfigError(key, "R2 with more than one actor data-parallel rank is not built (R3 is)");
}

void RlRoles::load_initial_weights(const std::string& model_dir) {
  if (engine::TrainEngine* actor = hybrid_->actor()) actor->load_hf_weights(model_dir);
  if (engine::InferEngine* ref = hybrid_->ref()) ref->load_hf_weights(model_dir);
  if (engine::InferEngine* reward_model = hybrid_->reward_model())
    reward_model->load_hf_weights(*config_.reward_model.model.path);
  engine::TrainEngine* critic = hybrid_->critic();
  if (!critic) return;
  const std::string critic_dir = config_.critic.model.path.value_or(model_dir);
  if (model::HfModelFolder::open(critic_dir).config.head == model::HeadKind::value)
    critic->load_hf_weights(critic_dir);
  else
    critic->load_hf_backbone(critic_dir, config_.critic.megatron.seed);
}

RlBatch RlRoles::generate(std::span<const RlPrompt> prompts, uint64_t request_base,
                          const engine::rollout::RolloutSamplingParams& params, std::span<const int64_t> eos_ids,
                          int64_t num_candidates) {
  // verl's generate_sequences: each rollout replica (its TP group) a contiguous run of the prompts.
  const RoleDispatch dispatch(DispatchMode::megatron_pp_as_dp_proto, hybrid_->parallel(Role::rollout),
                              hybrid_->runs(Role::rollout));
  RlBatch local;
  if (dispatch.member()) {
    std::vector<engine::rollout::RolloutRequest> requests;
    for (const int64_t i : dispatch.contiguous_chunk(int64_t(prompts.size())))
      requests.push_back({prompts[size_t(i)].tokens, request_base + uint64_t(i), 0});
    hybrid_->enter_generate();
    std::vector<engine::rollout::RolloutSample> samples = hybrid_->rollout()->generate(requests, params, eos_ids, num_candidates);
    hybrid_->leave_generate();
    local.reserve(samples.size());
    for (engine::rollout::RolloutSample& s : samples) {
      RlResponse r;
      r.group = int64_t(s.request_id - request_base);
      r.prompt = prompts[size_t(r.group)].tokens;
      r.response = std::move(s.token_ids);
      r.truncated = s.finish_reason == engine::FinishReason::length;
      r.rollout_log_probs.assign(s.logprobs.begin(), s.logprobs.end());
      if (!s.routed_experts.empty()) {  // the last token never ran: its row is -1 (the router chooses on replay)
        r.rollout_experts = std::move(s.routed_experts);
        r.rollout_experts.resize(size_t(num_tokens(r) * routing_.num_moe_layers * routing_.top_k), -1);
      }
      local.push_back(std::move(r));
    }
  }
  // One replica over the whole world (TP over it, or one process): every rank holds every sample.
  if (hybrid_->ranks(Role::rollout).everywhere() && dispatch.num_chunks() == 1) return local;
  if (!dispatch.collects()) local.clear();
  return gather_responses(std::move(local), world_);
}

void RlRoles::run_pass(Role role, DispatchMode mode, RlBatch& batch, const RlBatch& split_by, const PassOutputs& outputs,
                       const std::function<void(const std::vector<int64_t>&)>& compute) {
  hybrid_->enter_training();
  const RoleDispatch dispatch(mode, hybrid_->parallel(role), hybrid_->runs(role));
  const std::vector<int64_t> all = iota(int64_t(split_by.size()));
  const std::vector<int64_t> mine = dispatch.chunk(split_by, all, balance_batch_);
  if (dispatch.member()) compute(mine);
  // Every rank computed every response.
  if (hybrid_->ranks(role).everywhere() && dispatch.num_chunks() == 1) return;
  const std::span<const int64_t> sent = dispatch.collects() ? std::span<const int64_t>(mine) : std::span<const int64_t>();
  if (outputs.scores)
    gather_scores(batch, sent, world_);
  else
    gather_columns(batch, sent, outputs.columns, world_);
}

Metrics RlRoles::compute_log_prob(RlBatch& batch) {
  run_pass(Role::actor, DispatchMode::megatron_compute_proto, batch, batch,
           {{&RlResponse::old_log_probs, &RlResponse::entropy}}, [&](const std::vector<int64_t>& mine) {
             engine::TrainEngine& actor = *hybrid_->actor();
             // MoE: the pass records its routing (R2 replays it in the update), R3 replays the rollout's.
             const PrepareMicroBatch prepare = [&](engine::TensorMap& mb, const std::vector<int64_t>& group) {
               if (!records_routing_) return;
               add_record_experts(mb, routing_.num_moe_layers, routing_.top_k);
               if (replay_mode_ == RouterReplayMode::r3)
                 add_replay_experts(mb, batch, group, &RlResponse::rollout_experts, routing_.num_moe_layers,
                                    routing_.top_k);
             };
             const PassRun run =
                 run_micro_batches(batch, mine, log_prob_batching_, hybrid_->parallel(Role::actor).dp(),
                                   [&](const auto& mbs) {
                                     return actor.compute_log_prob(mbs, temperature_, model::EntropyOutput::compute);
                                   }, prepare);
             hybrid_->leave_log_prob();
             read_column(batch, run, "log_probs", &RlResponse::old_log_probs);
             read_column(batch, run, "entropy", &RlResponse::entropy);
             if (records_routing_)
               for (size_t m = 0; m < run.groups.size(); ++m)
                 read_recorded_experts(batch, run.groups[m], run.inputs[m], &RlResponse::old_experts);
           });
  const ActorSection& a = config_.actor_rollout_ref.actor;
  rl::VerlBatchInfo info;
  info.loss_scale_factor = a.loss.loss_scale_factor.value_or(double(config_.response_length()));
  const Tensor entropy_BT = column_matrix(batch, &RlResponse::entropy);
  Metrics metrics = moe_routing_metrics(batch, routing_, replay_mode_ != RouterReplayMode::disabled,
                                        replay_mode_ != RouterReplayMode::r3);
  metrics["actor/entropy"] = rl::agg_loss(entropy_BT, response_mask_matrix(batch), a.loss.loss_agg_mode, info);
  return metrics;
}

void RlRoles::compute_ref(RlBatch& batch) {
  run_pass(Role::ref, DispatchMode::megatron_compute_proto, batch, batch, {{&RlResponse::ref_log_prob}},
           [&](const std::vector<int64_t>& mine) {
             engine::InferEngine& ref = *hybrid_->ref();
             MicroBatching batching = log_prob_batching_;
             batching.responses =
                 config_.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu.value_or(log_prob_batching_.responses);
             batching.cp_size = config_.actor_rollout_ref.ref.megatron.context_parallel_size;
             const PassRun run = run_micro_batches(batch, mine, batching, hybrid_->parallel(Role::ref).dp(),
                                                   [&](const auto& mbs) {
                                                     return ref.compute_log_prob(mbs, temperature_,
                                                                                 model::EntropyOutput::skip);
                                                   });
             hybrid_->leave_ref();
             read_column(batch, run, "log_probs", &RlResponse::ref_log_prob);
           });
}

void RlRoles::compute_rm_scores(RlBatch& batch, const RlBatch& sequences) {
  run_pass(Role::reward_model, DispatchMode::megatron_compute_proto, batch, sequences, {.columns = {}, .scores = true},
           [&](const std::vector<int64_t>& mine) {
             engine::InferEngine& reward_model = *hybrid_->reward_model();
             const PassRun run =
                 run_micro_batches(sequences, mine, reward_model_batching_, hybrid_->parallel(Role::reward_model).dp(),
                                   [&](const auto& mbs) { return reward_model.compute_values(mbs); });
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
  run_pass(Role::critic, DispatchMode::megatron_compute_proto, batch, batch, {{&RlResponse::values}},
           [&](const std::vector<int64_t>& mine) {
             engine::TrainEngine& critic = *hybrid_->critic();
             const PassRun run = run_micro_batches(batch, mine, critic_batching_, hybrid_->parallel(Role::critic).dp(),
                                                   [&](const auto& mbs) { return critic.compute_values(mbs); });
             hybrid_->leave_values();
             read_column(batch, run, "values", &RlResponse::values);
           });
}

// The updates are dispatched ONE_TO_ALL: every rank of the role takes the whole batch and splits each
// mini-batch over its DP ranks itself (dp_micro_batches), so DP never changes what a mini-batch holds; the
// metrics are collected from the role's first rank.
Metrics RlRoles::update_critic(RlBatch& batch, int64_t step) {
  Metrics metrics;
  hybrid_->enter_training();
  if (hybrid_->critic()) {
    const int64_t mini_batch = config_.critic_ppo_mini_batch_size() * config_.actor_rollout_ref.rollout.sampling.n;
    const UpdatePass pass{*hybrid_->critic(),
                          hybrid_->parallel(Role::critic).dp(),
                          std::cref(*critic_loss_),
                          LossColumns::critic,
                          false,
                          critic_batching_,
                          balance_batch_,
                          model::EntropyOutput::skip,
                          1.0,
                          "critic",
                          config_.critic.megatron.skips_non_finite_steps(),
                          nullptr,
                          {}};
    metrics = run_update(batch,
                         epoch_mini_batches(int64_t(batch.size()), mini_batch, config_.critic_ppo_epochs(),
                                            config_.critic_shuffle(), config_.critic_data_loader_seed(), step),
                         pass, step);
    hybrid_->leave_update_critic();
  }
  const RoleRanks& critic_ranks = hybrid_->ranks(Role::critic);
  if (!critic_ranks.everywhere()) broadcast_metrics(metrics, world_, critic_ranks.root());
  return metrics;
}

Metrics RlRoles::update_actor(RlBatch& batch, int64_t step) {
  Metrics metrics;
  hybrid_->enter_training();
  if (hybrid_->actor()) {
    const ActorSection& a = config_.actor_rollout_ref.actor;
    const int64_t mini_batch = a.ppo_mini_batch_size * config_.actor_rollout_ref.rollout.sampling.n;
    const bool with_entropy = a.loss.entropy_coeff != 0 || a.calculate_entropy;
    const UpdatePass pass{*hybrid_->actor(),
                          hybrid_->parallel(Role::actor).dp(),
                          std::cref(actor_loss_),
                          LossColumns::actor,
                          config_.uses_reference(),
                          actor_batching_,
                          balance_batch_,
                          with_entropy ? model::EntropyOutput::compute : model::EntropyOutput::skip,
                          temperature_,
                          "actor",
                          a.megatron.skips_non_finite_steps(),
                          replay_mode_ == RouterReplayMode::r2   ? &RlResponse::old_experts
                          : replay_mode_ == RouterReplayMode::r3 ? &RlResponse::rollout_experts
                                                                 : nullptr,
                          routing_};
    metrics = run_update(
        batch, epoch_mini_batches(int64_t(batch.size()), mini_batch, a.ppo_epochs, a.shuffle, a.data_loader_seed, step),
        pass, step);
  }
  const RoleRanks& actor_ranks = hybrid_->ranks(Role::actor);
  if (!actor_ranks.everywhere()) broadcast_metrics(metrics, world_, actor_ranks.root());
  return metrics;
}

Metrics RlRoles::sync_weights() { return hybrid_->sync_weights(); }

}  // namespace rf::rl
