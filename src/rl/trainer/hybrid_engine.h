// HybridEngine (DESIGN §5, verl's hybrid engine and sharding managers): the roles of an RL run on their
// ranks, and the transitions between the stages of a step, in one place.
//
// Placement (device_mapping, role_placement.h): by default every role is on every rank; a role may sit on a
// subset of the world's ranks, with its own sub-communicator and its engine built only there; the reference,
// critic and reward model follow the actor unless placed. Each role has its ParallelContext from its megatron
// block (the rollout: rollout.tensor_model_parallel_size, no sequence parallel). Two kernel registries: the
// rollout's (always batch-invariant) and the other roles' (batch-invariant with trainer.deterministic).
// Engines: the actor (TrainEngine), the rollout (RolloutEngine), the reference (InferEngine, when a KL term
// needs it), the critic (TrainEngine over critic.model.path's value model, with a critic), the reward model
// (InferEngine, with reward_model.enable). When the rollout sits on the actor's ranks with the actor's TP size
// and compute dtype, it reads the actor's compute weights in place: no copy, no second resident copy.
//
// Transitions, one per stage boundary (the roles' stages in rl_roles.h call them):
//   enter_generate       the KV cache is allocated (free_cache_engine); weights the rollout reads in place
//                        are onloaded and complete
//   leave_generate       the KV cache is released (free_cache_engine): training gets the memory
//   enter_training       the step's generations are done (each training-side pass and update calls it): a
//                        rollout colocated with the actor that keeps its own weight copy drops it
//                        (free_cache_engine, drops_rollout_copy) until sync_weights rewrites every weight
//   leave_log_prob       the actor is idle until its update: its weights (param_offload) and activations
//   leave_ref            the reference: what its megatron block offloads
//   leave_reward_model   the reward model: what its megatron block offloads
//   leave_values         the critic is idle until its update: its weights and activations
//   leave_update_critic  the critic is idle until the next values pass: everything it offloads
//   sync_weights         the actor's weights into the rollout (weight_sync.h; nothing is copied when the
//                        rollout reads them in place), then the actor is idle until the next old-log-prob
//                        pass: everything it offloads
// Each engine brings back what a stage needs itself (engine/offload_set.h); the transitions only say when a
// role's memory may leave the device. Engines are null off their role's ranks, and a transition does nothing
// for them there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/infer_engine.h"
#include "engine/rollout/rollout_engine.h"
#include "engine/train_engine.h"
#include "kernels/kernel_registry.h"
#include "model/hf_folder.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_metrics.h"
#include "rl/trainer/role_placement.h"
#include "rl/trainer/weight_sync.h"

namespace rf::rl {

// One role's ranks: the world, or a sub-communicator of the ranks it was placed on.
class RoleRanks {
 public:
  RoleRanks(dist::ProcessGroup& world, const std::vector<int>& ranks, const std::string& name);
  bool member() const { return member_; }
  int64_t size() const { return ranks_.empty() ? world_.size() : int64_t(ranks_.size()); }
  bool everywhere() const { return own_ == nullptr && member_; }
  dist::ProcessGroup& group() { return own_ ? *own_ : world_; }
  int root() const { return root_; }  // its first world rank
  bool contains(const RoleRanks& other) const;

 private:
  dist::ProcessGroup& world_;
  std::vector<int> ranks_;  // empty: all
  std::unique_ptr<dist::ProcessGroup> own_;
  bool member_;
  int root_;
};

enum class Role : uint8_t { actor, rollout, ref, critic, reward_model };

class HybridEngine {
 public:
  // Tokens a micro-batch of each engine may hold (what its buffers are sized for).
  struct Capacities {
    int64_t actor = 0, ref = 0, critic = 0, reward_model = 0;
  };

  // Collective over `world`: the roles' sub-communicators and contexts, the engines on this rank's roles
  // (weights zero until loaded), the weight sync's groups. The critic's model is critic_hf_folder(config)'s.
  HybridEngine(const RlConfig& config, const model::ModelConfig& model_config, dist::ProcessGroup& world,
               MemoryTracker& tracker, const RolePlacement& placement, const Capacities& capacities);
  ~HybridEngine();

  RoleRanks& ranks(Role role) { return *ranks_[size_t(role)]; }
  // The role's context on its ranks; the single-process context off them (and for a role the run lacks).
  dist::ParallelContext& parallel(Role role) { return parallel_[size_t(role)]; }
  // This rank's engines: null off the role's ranks or when the run has no such role.
  engine::TrainEngine* actor() const { return actor_.get(); }
  engine::rollout::RolloutEngine* rollout() const { return rollout_.get(); }
  engine::InferEngine* ref() const { return ref_.get(); }
  engine::TrainEngine* critic() const { return critic_.get(); }
  engine::InferEngine* reward_model() const { return reward_model_.get(); }
  // Whether this rank holds the role's engine.
  bool runs(Role role) const;

  void enter_generate();
  void leave_generate();
  void leave_log_prob();
  void leave_ref();
  void leave_reward_model();
  void leave_values();
  void leave_update_critic();
  void enter_training();
  // Whether enter_training drops the rollout's own weight copy, so a sync must come before the next
  // generation even when the actor did not change (critic warmup). The same on every rank.
  bool drops_rollout_copy() const { return drops_rollout_copy_; }
  // Collective over the world. Returns perf/update_weights_bytes (received over the network, all ranks) and
  // rollout/weights_checksum.
  Metrics sync_weights();

 private:
  const RlConfig& config_;
  dist::ProcessGroup& world_;
  std::vector<std::unique_ptr<RoleRanks>> ranks_;  // by Role
  std::vector<dist::ParallelContext> parallel_;    // by Role
  kernels::KernelRegistry kernels_, rollout_kernels_;
  std::unique_ptr<engine::TrainEngine> actor_;
  std::unique_ptr<engine::rollout::RolloutEngine> rollout_;
  std::unique_ptr<engine::InferEngine> ref_;
  std::unique_ptr<engine::TrainEngine> critic_;
  std::unique_ptr<engine::InferEngine> reward_model_;
  WeightSync weight_sync_;
  bool drops_rollout_copy_ = false;
};

// The critic's model folder: critic.model.path's (a *ForTokenClassification folder is a critic already;
// an LM's backbone gets a new value head of one output, verl's critic from the actor's model). What
// the critic's checkpoints export (critic_huggingface/). ConfigError naming critic.model.path for a
// reward model or a value model of several labels.
model::HfModelFolder critic_hf_folder(const RlConfig& config);

}  // namespace rf::rl
