// The roles of an RL run on the hybrid engine (DESIGN §5, spec verl.md §3): the actor (TrainEngine),
// the rollout (RolloutEngine, its own TP layout and a batch-invariant kernel registry), when a KL
// term needs it the reference (InferEngine), and with adv_estimator gae the critic (a TrainEngine over a
// value model: critic.model.path's backbone under a value head), with reward_model.enable the reward
// model (InferEngine over a one-label sequence classifier), all on every rank of the world. Each method is
// one stage of the step, a collective over the ranks, with its dispatch mode (role_dispatch.h):
//   generate          MEGATRON_PP_AS_DP  gen: n responses per prompt (the KV cache is resumed for it and, with
//                                        free_cache_engine, released afterwards; every later stage enters
//                                        training, where a rollout's own weight copy is dropped until the sync)
//   compute_rm_scores MEGATRON_COMPUTE   each response's score: the reward model's output at its last token
//   compute_log_prob  MEGATRON_COMPUTE   old_log_prob (+ entropy) with the actor, at the rollout temperature; an MoE
//                                        actor records its routing (old_experts) and with router_replay R3 replays
//                                        the rollout's (rollout_experts); update_actor replays old_experts (R2) or
//                                        rollout_experts (R3)
//   compute_ref       MEGATRON_COMPUTE   ref_log_prob with the reference
//   compute_values    MEGATRON_COMPUTE   values with the critic
//   update_critic     ONE_TO_ALL         mini-batches x critic.ppo_epochs through CriticLoss, one optimizer step
//                                        per mini-batch, each mini-batch split over the critic's DP ranks
//   update_actor      ONE_TO_ALL         mini-batches x ppo_epochs through ActorLoss, the same way
//   sync_weights      -                  the actor's weights into the rollout's layout (weight_sync.h: colocated,
//                                        or streamed in buckets to the rollout's ranks only, checksummed)
// The roles' placement, engines and the transitions between stages are the HybridEngine's (hybrid_engine.h):
// idle roles offload what their megatron block asks, the KV cache exists only while generating, and the
// weight sync runs there. The controller stays SPMD: every rank keeps the whole batch, and each stage ends by
// bringing its role's results to every rank (rl_transfer.h).
// The rollout is data parallel over its ranks: each replica (its TP group) generates a contiguous share of
// the prompts; generation is keyed by (seed, request, sample, position) and the kernels are
// batch-invariant, so the union is what one process generates. The forward passes (old log-probs,
// reference, values, reward model) are split the same way over each role's DP replicas, and each DP rank
// of the actor and the critic runs its slice of every mini-batch of an update.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_metrics.h"
#include "rl/trainer/hybrid_engine.h"
#include "rl/trainer/role_dispatch.h"
#include "rl/trainer/role_placement.h"
#include "engine/infer_engine.h"
#include "engine/rollout/rollout_engine.h"
#include "engine/train_engine.h"
#include "model/hf_folder.h"
#include "rl/actor_loss.h"
#include "rl/critic_loss.h"

namespace rf::rl {

struct RlPrompt {
  std::vector<int64_t> tokens;
  std::string ground_truth;
};

// How a training role cuts responses into micro-batches.
// With context parallel a response's tokens count as the role's engine pads them (a multiple of 2 CP), and the
// token budget is per rank, as verl's ppo_max_token_len_per_gpu: a micro-batch holds up to max_tokens x CP.
struct MicroBatching {
  int64_t responses = 0;   // per micro-batch
  int64_t max_tokens = 0;  // > 0: by tokens instead (use_dynamic_bsz; split_micro_batches)
  int64_t cp_size = 1;     // the role's context_parallel_size
};

// How the old-log-prob pass cuts its micro-batches: rollout.log_prob_micro_batch_size_per_gpu responses
// (verl; ROLL's actor_train.infer_batch_size), null: the actor's training micro-batch; by tokens
// (use_dynamic_bsz) within the actor's budget. It is also the reference's and the reward model's default.
MicroBatching old_log_prob_batching(const RolloutSection& rollout, const MicroBatching& actor);

class RlRoles {
 public:
  RlRoles(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
          MemoryTracker& tracker, const RolePlacement& placement = {});

  // Initial weights: the actor from `model_dir` (an HF folder), the reference too; the critic from
  // critic.model.path (model_dir when null): a value model's folder whole, an LM's backbone under a new
  // value head drawn from critic.megatron.seed.
  void load_initial_weights(const std::string& model_dir);

  // `request_base` numbers the prompts' random streams (request_base + i for prompt i): unique per
  // prompt over the run. Responses ordered by prompt, then sample (verl's interleaved repeat).
  RlBatch generate(std::span<const RlPrompt> prompts, uint64_t request_base, const engine::rollout::RolloutSamplingParams& params,
                   std::span<const int64_t> eos_ids, int64_t num_candidates);
  // Fills old_log_probs and entropy; returns actor/entropy (agg_loss of the entropy over the
  // response tokens with loss_agg_mode).
  Metrics compute_log_prob(RlBatch& batch);
  void compute_ref(RlBatch& batch);
  // Sets each response's score (its reward extras cleared) to the reward model's score of the same
  // response of `sequences` (rl_reward_model_input.h), on every rank (needs has_reward_model()).
  void compute_rm_scores(RlBatch& batch, const RlBatch& sequences);
  // Fills values (needs a critic: has_critic()).
  void compute_values(RlBatch& batch);
  // Returns the critic's metrics (critic/vf_loss, vf_clipfrac, vpred_mean averaged over mini-batches) and
  // critic/grad_norm, critic/lr. Reads values and returns.
  Metrics update_critic(RlBatch& batch, int64_t step);
  // Returns the actor's metrics (averaged over mini-batches) and actor/grad_norm, actor/lr. sync_weights must
  // follow before the next generation (and after any stage above when drops_rollout_copy()).
  Metrics update_actor(RlBatch& batch, int64_t step);
  // Returns perf/update_weights_bytes (received over the network, all ranks) and rollout/weights_checksum.
  Metrics sync_weights();

  bool has_ref() const { return config_.uses_reference(); }
  // The actor's data-parallel size (its ranks / its TP x PP size), known on every rank.
  int64_t actor_dp_size() const {
    const engine::EngineConfig& megatron = config_.actor_rollout_ref.actor.megatron;
    return hybrid_->ranks(Role::actor).size() /
           (megatron.tensor_model_parallel_size * megatron.pipeline_model_parallel_size);
  }
  // How many world ranks each role runs on, known on every rank (the denominators of MFU).
  struct RankCounts {
    int64_t actor, rollout, ref, critic, reward_model;
  };
  RankCounts rank_counts() const {
    return {hybrid_->ranks(Role::actor).size(), hybrid_->ranks(Role::rollout).size(), hybrid_->ranks(Role::ref).size(),
            hybrid_->ranks(Role::critic).size(), hybrid_->ranks(Role::reward_model).size()};
  }
  bool has_critic() const { return critic_loss_.has_value(); }
  bool has_reward_model() const { return config_.reward_model.enable; }
  // Whether the stages after generate drop the rollout's own weight copy (HybridEngine::enter_training), so
  // that a step syncs even when the actor did not update (critic warmup). The same on every rank.
  bool drops_rollout_copy() const { return hybrid_->drops_rollout_copy(); }
  // Whether this rank's rollout reads the actor's weights in place (no copy, no second resident copy).
  bool rollout_shares_actor_weights() const { return hybrid_->rollout() && hybrid_->rollout()->shares_weights(); }
  // The actor's engine and its context: only on the actor's ranks (in_actor()).
  bool in_actor() const { return hybrid_->actor() != nullptr; }
  engine::TrainEngine& actor() { return *hybrid_->actor(); }
  dist::ParallelContext& actor_parallel() { return hybrid_->parallel(Role::actor); }
  // The critic's engine: only on the critic's ranks of a run with a critic (in_critic()).
  bool in_critic() const { return hybrid_->critic() != nullptr; }
  engine::TrainEngine& critic() { return *hybrid_->critic(); }
  dist::ParallelContext& critic_parallel() { return hybrid_->parallel(Role::critic); }

 private:
  // What a forward pass brings back to every rank: per-token columns, or (a reward model's) the scores.
  struct PassOutputs {
    std::vector<std::vector<float> RlResponse::*> columns;
    bool scores = false;
  };
  // One forward pass of `role` dispatched by `mode`: on the role's ranks `compute` fills this rank's chunk
  // of `split_by` (the responses as the role reads them) into `batch`; the collect ranks' outputs then reach
  // every rank. The one implementation of split / compute / collect for every pass.
  void run_pass(Role role, DispatchMode mode, RlBatch& batch, const RlBatch& split_by, const PassOutputs& outputs,
                const std::function<void(const std::vector<int64_t>&)>& compute);

  // Router replay (actor_rollout_ref.actor.router_replay.mode) and the MoE routing records: refuses a mode the
  // model or the actor's layout cannot run, by key.
  void set_up_router_replay(const model::ModelConfig& model_config, const RolePlacement& placement,
                            dist::ProcessGroup& world);

  const RlConfig& config_;
  dist::ProcessGroup& world_;
  std::unique_ptr<HybridEngine> hybrid_;  // the roles' ranks and engines, and the transitions between stages
  rl::ActorLoss actor_loss_;
  bool balance_batch_;  // trainer.balance_batch: the DP shares of every pass balanced by workload
  std::optional<rl::CriticLoss> critic_loss_;  // set when the run has a critic
  double temperature_;  // of the actor's log-probs: the rollout's log-prob temperature
  MicroBatching actor_batching_, log_prob_batching_, critic_batching_, reward_model_batching_;
  RouterReplayMode replay_mode_ = RouterReplayMode::disabled;
  RoutingShape routing_;          // MoE models' (zero for a dense one)
  bool records_routing_ = false;  // the old-log-prob pass records its routing (MoE, one-chunk, no CP)
};

// The rollout's sampling parameters from actor_rollout_ref.rollout (train: its keys; validation: val_kwargs).
engine::rollout::RolloutSamplingParams train_sampling(const RolloutSection& rollout, int64_t response_length,
                                                      uint64_t seed);
// ReMax's baseline generation (verl's gen_max: do_sample false): one greedy response per prompt.
engine::rollout::RolloutSamplingParams greedy_sampling(const RolloutSection& rollout, int64_t response_length,
                                                       uint64_t seed);
engine::rollout::RolloutSamplingParams val_sampling(const RolloutSection& rollout, int64_t response_length,
                                                    uint64_t seed);

}  // namespace rf::rl
