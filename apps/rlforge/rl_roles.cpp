#include "apps/rlforge/rl_roles.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "apps/rlforge/sft_parallel.h"
#include "core/philox.h"
#include "data/index_permutation.h"
#include "engine/offload_set.h"
#include "rl/agg_loss.h"

namespace rf::apps {
namespace {

rl::ActorLossConfig actor_loss_config(const RlConfig& config) {
  const ActorSection& a = config.actor_rollout_ref.actor;
  rl::ActorLossConfig c;
  c.loss_mode = a.policy_loss.loss_mode;
  c.loss_agg_mode = rl::parse_agg_mode(a.loss_agg_mode);
  c.policy_loss.clip_ratio = a.clip_ratio;
  c.policy_loss.clip_ratio_low = a.clip_ratio_low;
  c.policy_loss.clip_ratio_high = a.clip_ratio_high;
  c.policy_loss.clip_ratio_c = a.clip_ratio_c;
  c.policy_loss.tau_pos = a.tau_pos;
  c.policy_loss.tau_neg = a.tau_neg;
  c.policy_loss.kl_cov_ratio = a.policy_loss.kl_cov_ratio;
  c.policy_loss.ppo_kl_coef = a.policy_loss.ppo_kl_coef;
  c.entropy_coeff = a.entropy_coeff;
  c.use_kl_loss = a.use_kl_loss;
  c.kl_loss_coef = a.kl_loss_coef;
  c.kl_loss_type = rl::parse_kl_penalty(a.kl_loss_type);
  c.loss_scale_factor = a.loss_scale_factor;
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

kernels::KernelConfig kernel_config(bool batch_invariant) {
  kernels::KernelConfig c;
  c.batch_invariant = batch_invariant;
  return c;
}

// The old-log-prob and reference passes' micro-batches: responses only, no loss columns.
std::vector<engine::TensorMap> forward_micro_batches(const RlBatch& batch, const std::vector<std::vector<int64_t>>& groups) {
  std::vector<engine::TensorMap> mbs;
  for (const std::vector<int64_t>& g : groups) mbs.push_back(make_micro_batch(batch, g, LossColumns::none, false));
  return mbs;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
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

RlRoles::RlRoles(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
                 MemoryTracker& tracker)
    : config_(config),
      actor_parallel_(make_parallel_context(config.actor_rollout_ref.actor.megatron, world)),
      rollout_parallel_(make_parallel_context(rollout_layout(config.actor_rollout_ref.rollout), world)),
      ref_parallel_(make_parallel_context(config.actor_rollout_ref.ref.megatron, world)),
      // Deterministic mode: every path batch-invariant (the rollout's always is).
      kernels_(kernel_config(config.trainer.deterministic)),
      rollout_kernels_(kernel_config(true)),
      actor_loss_(actor_loss_config(config)) {
  const ActorSection& a = config.actor_rollout_ref.actor;
  const RolloutSection& r = config.actor_rollout_ref.rollout;
  const int64_t dp = actor_parallel_.dp().size();
  const int64_t mini_batch_responses = a.ppo_mini_batch_size * r.n;
  responses_per_micro_batch_ = a.ppo_micro_batch_size_per_gpu.value_or(mini_batch_responses / dp);
  const int64_t longest = config.prompt_length() + config.response_length();
  max_tokens_per_micro_batch_ = a.use_dynamic_bsz ? a.ppo_max_token_len_per_gpu : 0;
  const int64_t log_prob_responses = r.log_prob_micro_batch_size_per_gpu.value_or(responses_per_micro_batch_);
  const int64_t capacity =
      a.use_dynamic_bsz ? std::max(a.ppo_max_token_len_per_gpu, longest)
                        : std::max(responses_per_micro_batch_, log_prob_responses) * longest;

  optim::OptimConfig optim = a.optim;
  optim.total_training_steps = config.trainer.total_training_steps;
  actor_ = std::make_unique<engine::TrainEngine>(a.megatron, optim, model_config, kernels_, actor_parallel_, tracker,
                                                 capacity);
  rollout_ = std::make_unique<engine::rollout::RolloutEngine>(
      model_config, engine::EngineConfig{.dtype = r.dtype}.compute_dtype(), rollout_config(config), rollout_kernels_,
      rollout_parallel_, tracker);
  // Colocated with training: the KV cache exists only while the rollout generates.
  if (r.free_cache_engine) rollout_->release();
  temperature_ = train_sampling(r, config.response_length(), 0).logprob_temperature();
  if (a.use_kl_loss || config.algorithm.use_kl_in_reward)
    ref_ = std::make_unique<engine::InferEngine>(config.actor_rollout_ref.ref.megatron, model_config, kernels_,
                                                 ref_parallel_, tracker, capacity);
}

void RlRoles::load_initial_weights(const std::string& model_dir) {
  actor_->load_hf_weights(model_dir);
  if (ref_) ref_->load_hf_weights(model_dir);
}

std::vector<engine::TensorMap> RlRoles::micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                                      LossColumns columns, bool dp_share) const {
  std::vector<int64_t> mine = indices;
  if (dp_share) {
    // DP rank r runs the contiguous r-th of the mini-batch (train_engine.h: the one-rank run of all
    // of it is the reference).
    const int64_t dp = actor_parallel_.dp().size(), rank = actor_parallel_.dp().rank();
    const int64_t share = int64_t(indices.size()) / dp;
    mine.assign(indices.begin() + rank * share, indices.begin() + (rank + 1) * share);
  }
  std::vector<engine::TensorMap> result;
  for (const std::vector<int64_t>& group :
       split_micro_batches(batch, mine, responses_per_micro_batch_, max_tokens_per_micro_batch_))
    result.push_back(make_micro_batch(batch, group, columns, ref_ != nullptr));
  return result;
}

RlBatch RlRoles::generate(std::span<const RlPrompt> prompts, uint64_t request_base,
                          const engine::rollout::RolloutSamplingParams& params, std::span<const int64_t> eos_ids,
                          int64_t num_candidates) {
  std::vector<engine::rollout::RolloutRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) requests.push_back({prompts[i].tokens, request_base + i, 0});
  const bool free_cache = config_.actor_rollout_ref.rollout.free_cache_engine;
  if (free_cache) rollout_->resume();
  std::vector<engine::rollout::RolloutSample> samples = rollout_->generate(requests, params, eos_ids, num_candidates);
  if (free_cache) rollout_->release();
  RlBatch batch;
  batch.reserve(samples.size());
  for (engine::rollout::RolloutSample& s : samples) {
    RlResponse r;
    r.group = int64_t(s.request_id - request_base);
    r.prompt = prompts[size_t(r.group)].tokens;
    r.response = std::move(s.token_ids);
    r.truncated = s.finish_reason == engine::FinishReason::length;
    r.rollout_log_probs.assign(s.logprobs.begin(), s.logprobs.end());
    batch.push_back(std::move(r));
  }
  return batch;
}

Metrics RlRoles::compute_log_prob(RlBatch& batch) {
  const std::vector<int64_t> all = iota(int64_t(batch.size()));
  const std::vector<std::vector<int64_t>> groups =
      split_micro_batches(batch, all, responses_per_micro_batch_, max_tokens_per_micro_batch_);
  const std::vector<engine::TensorMap> mbs = forward_micro_batches(batch, groups);
  const auto no_loss = [](const engine::TensorMap&, const model::ModelOutputs&, const engine::LossContext&, TensorView,
                          TensorView) { return engine::LossOutput{}; };
  const engine::ForwardBackwardResult out = actor_->forward_backward(mbs, no_loss, engine::ForwardOnly::yes,
                                                                     model::EntropyOutput::compute, temperature_);
  // Idle until the update: its weights may leave the device while the reference runs.
  actor_->offload({.params = config_.actor_rollout_ref.actor.megatron.param_offload});
  for (size_t m = 0; m < groups.size(); ++m) {
    read_token_column(batch, groups[m], out.outputs[m].get("log_probs"), &RlResponse::old_log_probs);
    read_token_column(batch, groups[m], out.outputs[m].get("entropy"), &RlResponse::entropy);
  }
  const ActorSection& a = config_.actor_rollout_ref.actor;
  rl::VerlBatchInfo info;
  info.loss_scale_factor = a.loss_scale_factor ? *a.loss_scale_factor : double(config_.response_length());
  const Tensor entropy_BT = column_matrix(batch, &RlResponse::entropy);
  return {{"actor/entropy",
           rl::agg_loss(entropy_BT, response_mask_matrix(batch), rl::parse_agg_mode(a.loss_agg_mode), info)}};
}

void RlRoles::compute_ref(RlBatch& batch) {
  const std::vector<int64_t> all = iota(int64_t(batch.size()));
  const int64_t per_mb =
      config_.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu.value_or(responses_per_micro_batch_);
  const std::vector<std::vector<int64_t>> groups = split_micro_batches(batch, all, per_mb, max_tokens_per_micro_batch_);
  const std::vector<engine::TensorMap> out = ref_->compute_log_prob(forward_micro_batches(batch, groups), temperature_, model::EntropyOutput::skip);
  if (config_.actor_rollout_ref.ref.megatron.param_offload) ref_->offload();
  for (size_t m = 0; m < groups.size(); ++m)
    read_token_column(batch, groups[m], out[m].get("log_probs"), &RlResponse::ref_log_prob);
}

Metrics RlRoles::update_actor(RlBatch& batch, int64_t step) {
  const ActorSection& a = config_.actor_rollout_ref.actor;
  const int64_t B = int64_t(batch.size());
  const int64_t mini_batch = a.ppo_mini_batch_size * config_.actor_rollout_ref.rollout.n;
  const bool with_entropy = a.entropy_coeff != 0 || a.calculate_entropy;
  Metrics sums;
  int64_t num_mini_batches = 0;
  for (int64_t epoch = 0; epoch < a.ppo_epochs; ++epoch) {
    std::vector<int64_t> order = iota(B);
    if (a.shuffle) {
      // A permutation keyed by (data_loader_seed, step, epoch): a resumed run shuffles the same way.
      const std::array<uint32_t, 4> key = Philox(a.data_loader_seed, uint64_t(step)).block_at(uint64_t(epoch));
      const data::IndexPermutation permutation(uint64_t(B), uint64_t(key[0]) << 32 | key[1]);
      for (int64_t i = 0; i < B; ++i) order[size_t(i)] = int64_t(permutation.forward(uint64_t(i)));
    }
    for (int64_t first = 0; first < B; first += mini_batch) {
      const std::vector<int64_t> indices(order.begin() + first, order.begin() + std::min(B, first + mini_batch));
      const std::vector<engine::TensorMap> mbs = micro_batches(batch, indices, LossColumns::actor, true);
      const engine::ForwardBackwardResult fb = actor_->forward_backward(
          mbs, std::cref(actor_loss_), engine::ForwardOnly::no,
          with_entropy ? model::EntropyOutput::compute : model::EntropyOutput::skip, temperature_);
      for (const auto& [name, value] : fb.metrics)
        sums[name] += actor_parallel_.dp().all_reduce_scalar(value, dist::ReduceOp::sum);
      sums["actor/grad_norm"] += actor_->optimizer_step();
      ++num_mini_batches;
    }
  }
  Metrics metrics;
  for (const auto& [name, value] : sums) metrics[name] = value / double(num_mini_batches);
  metrics["actor/lr"] = actor_->lr();
  actor_->lr_step();
  return metrics;
}

void RlRoles::sync_weights() {
  actor_->export_weights([&](const std::string& name, TensorView full) { rollout_->update_weights(name, full); });
  // The actor is idle from here to the next step's old-log-prob pass (generation runs on the
  // rollout's own weights): what the config offloads leaves the device tier.
  actor_->offload(engine::configured_offload(config_.actor_rollout_ref.actor.megatron));
}

}  // namespace rf::apps
