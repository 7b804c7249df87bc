// OffloadSet: which parts of a training engine's state an idle-role offload moves (verl's
// actor_rollout_ref.actor.megatron.{param_offload, grad_offload, optimizer_offload}; verl.md §3.4).
#pragma once

#include "engine/engine_config.h"

namespace rf::engine {

struct OffloadSet {
  bool params = false;     // the f32 master weights and the compute (bf16) copy
  bool grads = false;      // the GradBuffer
  bool optimizer = false;  // the AdamW moments of this rank's shard

  static OffloadSet all() { return {.params = true, .grads = true, .optimizer = true}; }
  bool any() const { return params || grads || optimizer; }
  bool operator==(const OffloadSet&) const = default;
};

// What the config's megatron block asks to offload between uses.
inline OffloadSet configured_offload(const EngineConfig& config) {
  return {.params = config.param_offload, .grads = config.grad_offload, .optimizer = config.optimizer_offload};
}

}  // namespace rf::engine
