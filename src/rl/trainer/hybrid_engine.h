// HybridEngine: the transitions between the stages of an RL step (DESIGN §5, verl's sharding managers), in
// one place: what each stage needs on the device tier, what the stage before it leaves there, the rollout's
// KV cache and the actor -> rollout weight sync. The roles' stages (rl_roles.h) call one transition each:
//   enter_generate       the KV cache is allocated (free_cache_engine); weights the rollout reads in place
//                        are onloaded and complete
//   leave_generate       the KV cache is released (free_cache_engine): training gets the memory
//   leave_log_prob       the actor is idle until its update: its weights (param_offload) and activations
//   leave_ref            the reference: what its megatron block offloads
//   leave_reward_model   the reward model: what its megatron block offloads
//   leave_values         the critic is idle until its update: its weights and activations
//   leave_update_critic  the critic is idle until the next values pass: everything it offloads
//   enter_update_actor   a rollout colocated with the actor that keeps its own weight copy drops it
//                        (free_cache_engine): the update is where training's memory peaks, and the sync
//                        that follows every actor update rewrites every weight
//   sync_weights         the actor's weights into the rollout (weight_sync.h; nothing is copied when the
//                        rollout reads them in place), then the actor is idle until the next old-log-prob
//                        pass: everything it offloads
// Each engine brings back what a stage needs itself (engine/offload_set.h); the transitions only say when a
// role's memory may leave the device. Engines are null off their role's ranks, and a transition does
// nothing for them there.
#pragma once

#include "engine/infer_engine.h"
#include "engine/rollout/rollout_engine.h"
#include "engine/train_engine.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_metrics.h"
#include "rl/trainer/weight_sync.h"

namespace rf::rl {

class HybridEngine {
 public:
  // This rank's engines of each role (null off the role's ranks), owned by the caller.
  struct Engines {
    engine::TrainEngine* actor = nullptr;
    engine::rollout::RolloutEngine* rollout = nullptr;
    engine::InferEngine* ref = nullptr;
    engine::TrainEngine* critic = nullptr;
    engine::InferEngine* reward_model = nullptr;
  };

  // Collective over `world` (the weight sync's groups). With free_cache_engine the rollout's KV cache is
  // expected released (as its builder does, before the other roles take their memory).
  HybridEngine(const RlConfig& config, const Engines& engines, dist::ProcessGroup& world,
               const std::vector<int>& actor_ranks, const std::vector<int>& rollout_ranks);

  void enter_generate();
  void leave_generate();
  void leave_log_prob();
  void leave_ref();
  void leave_reward_model();
  void leave_values();
  void leave_update_critic();
  void enter_update_actor();
  // Collective over the world. Returns perf/update_weights_bytes (received over the network, all ranks) and
  // rollout/weights_checksum.
  Metrics sync_weights();

 private:
  const RlConfig& config_;
  Engines engines_;
  dist::ProcessGroup& world_;
  WeightSync weight_sync_;
};

}  // namespace rf::rl
