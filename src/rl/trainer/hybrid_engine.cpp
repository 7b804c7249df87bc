#include "rl/trainer/hybrid_engine.h"

#include "engine/offload_set.h"

namespace rf::rl {

HybridEngine::HybridEngine(const RlConfig& config, const Engines& engines, dist::ProcessGroup& world,
                           const std::vector<int>& actor_ranks, const std::vector<int>& rollout_ranks)
    : config_(config),
      engines_(engines),
      world_(world),
      weight_sync_(world, actor_ranks, rollout_ranks,
                   config.actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes << 20) {}

void HybridEngine::enter_generate() {
  if (!engines_.rollout) return;
  // Weights read in place must be on the device and complete (the actor may have offloaded them).
  if (engines_.rollout->shares_weights()) (void)engines_.actor->compute_weights();
  if (config_.actor_rollout_ref.rollout.free_cache_engine) engines_.rollout->resume();
}

void HybridEngine::leave_generate() {
  if (engines_.rollout && config_.actor_rollout_ref.rollout.free_cache_engine) engines_.rollout->release();
}

void HybridEngine::leave_log_prob() {
  const engine::EngineConfig& actor = config_.actor_rollout_ref.actor.megatron;
  if (engines_.actor) engines_.actor->offload({.params = actor.param_offload, .activations = actor.release_activations});
}

void HybridEngine::leave_ref() {
  if (engines_.ref) engines_.ref->offload(engine::configured_offload(config_.actor_rollout_ref.ref.megatron));
}

void HybridEngine::leave_reward_model() {
  if (engines_.reward_model) engines_.reward_model->offload(engine::configured_offload(config_.reward_model.megatron));
}

void HybridEngine::leave_values() {
  const engine::EngineConfig& critic = config_.critic.megatron;
  if (engines_.critic)
    engines_.critic->offload({.params = critic.param_offload, .activations = critic.release_activations});
}

void HybridEngine::leave_update_critic() {
  if (engines_.critic) engines_.critic->offload(engine::configured_offload(config_.critic.megatron));
}

void HybridEngine::enter_update_actor() {
  engine::rollout::RolloutEngine* rollout = engines_.rollout;
  if (rollout && !rollout->shares_weights() && weight_sync_.colocated() &&
      config_.actor_rollout_ref.rollout.free_cache_engine)
    rollout->drop_weights();
}

Metrics HybridEngine::sync_weights() {
  engine::TrainEngine* actor = engines_.actor;
  engine::rollout::RolloutEngine* rollout = engines_.rollout;
  const WeightSync::Export export_actor = [&](const WeightSync::Sink& sink) { actor->export_weights(sink); };
  // A rollout that reads the actor's weights in place has them already: the sync only checksums the export.
  const WeightSync::Sink load_rollout = [&](const std::string& name, TensorView full) {
    if (!rollout->shares_weights()) rollout->update_weights(name, full);
  };
  const WeightSync::Report report =
      weight_sync_.sync(actor ? &export_actor : nullptr, rollout ? &load_rollout : nullptr);
  if (actor) actor->offload(engine::configured_offload(config_.actor_rollout_ref.actor.megatron));
  const double bytes = world_.all_reduce_scalar(double(report.bytes_received), dist::ReduceOp::sum);
  // The checksum's low 48 bits: an integer a double holds exactly, enough to tell two syncs apart.
  return {{"perf/update_weights_bytes", bytes},
          {"rollout/weights_checksum", double(report.checksum & ((uint64_t(1) << 48) - 1))}};
}

}  // namespace rf::rl
