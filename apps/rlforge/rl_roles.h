// The roles of an RL run on the hybrid engine (DESIGN §5, spec verl.md §3): the actor (TrainEngine),
// the rollout (RolloutEngine, its own TP layout and a batch-invariant kernel registry) and, when a KL
// term needs it, the reference (InferEngine), all on every rank of the world. Each method is one
// stage of the step, a collective over the ranks:
//   generate         gen: n responses per prompt (the KV cache is resumed for it and, with
//                    free_cache_engine, released afterwards)
//   compute_log_prob old_log_prob (+ entropy) with the actor, at the rollout temperature
//   compute_ref      ref_log_prob with the reference
//   update_actor     mini-batches x ppo_epochs through ActorLoss, one optimizer step per mini-batch
//   sync_weights     the actor's weights streamed into the rollout's layout, one tensor at a time
// Idle roles offload what their megatron block asks (param_offload, grad_offload, optimizer_offload):
// the actor after the weight sync (all it has) and after the old-log-prob pass (its weights), the
// reference after its pass; each engine brings back what a stage needs (engine/offload_set.h).
// The batch is the same on every rank (generation is keyed by (seed, request, sample, position), so
// every rank draws the same tokens); each DP rank of the actor runs its slice of every mini-batch.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "apps/rlforge/rl_batch.h"
#include "apps/rlforge/rl_config.h"
#include "apps/rlforge/rl_metrics.h"
#include "engine/infer_engine.h"
#include "engine/rollout/rollout_engine.h"
#include "engine/train_engine.h"
#include "rl/actor_loss.h"

namespace rf::apps {

struct RlPrompt {
  std::vector<int64_t> tokens;
  std::string ground_truth;
};

class RlRoles {
 public:
  RlRoles(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
          MemoryTracker& tracker);

  // Initial weights: the actor from `model_dir` (an HF folder), the reference too.
  void load_initial_weights(const std::string& model_dir);

  // `request_base` numbers the prompts' random streams (request_base + i for prompt i): unique per
  // prompt over the run. Responses ordered by prompt, then sample (verl's interleaved repeat).
  RlBatch generate(std::span<const RlPrompt> prompts, uint64_t request_base, const engine::rollout::RolloutSamplingParams& params,
                   std::span<const int64_t> eos_ids, int64_t num_candidates);
  // Fills old_log_probs and entropy; returns actor/entropy (agg_loss of the entropy over the
  // response tokens with loss_agg_mode).
  Metrics compute_log_prob(RlBatch& batch);
  void compute_ref(RlBatch& batch);
  // Returns the actor's metrics (averaged over mini-batches) and actor/grad_norm, actor/lr.
  Metrics update_actor(RlBatch& batch, int64_t step);
  void sync_weights();

  bool has_ref() const { return ref_ != nullptr; }
  engine::TrainEngine& actor() { return *actor_; }
  engine::rollout::RolloutEngine& rollout() { return *rollout_; }
  dist::ParallelContext& actor_parallel() { return actor_parallel_; }

 private:
  // Micro-batches of the responses `indices` (this DP rank's share when `dp_share`).
  std::vector<engine::TensorMap> micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                               LossColumns columns, bool dp_share) const;

  const RlConfig& config_;
  dist::ParallelContext actor_parallel_, rollout_parallel_, ref_parallel_;
  kernels::KernelRegistry kernels_, rollout_kernels_;
  std::unique_ptr<engine::TrainEngine> actor_;
  std::unique_ptr<engine::rollout::RolloutEngine> rollout_;
  std::unique_ptr<engine::InferEngine> ref_;
  rl::ActorLoss actor_loss_;
  double temperature_;  // of the actor's log-probs: the rollout's log-prob temperature
  int64_t responses_per_micro_batch_;
  int64_t max_tokens_per_micro_batch_;  // > 0: micro-batches cut by tokens (use_dynamic_bsz)
};

// The rollout's sampling parameters from actor_rollout_ref.rollout (train: its keys; validation: val_kwargs).
engine::rollout::RolloutSamplingParams train_sampling(const RolloutSection& rollout, int64_t response_length,
                                                      uint64_t seed);
engine::rollout::RolloutSamplingParams val_sampling(const RolloutSection& rollout, int64_t response_length,
                                                    uint64_t seed);

}  // namespace rf::apps
