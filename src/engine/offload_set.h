// OffloadSet: which parts of a training engine's state an idle-role offload moves (verl's
// actor_rollout_ref.actor.megatron.{param_offload, grad_offload, optimizer_offload}; verl.md §3.4), and
// whether its activation buffers are given back meanwhile (rlforge's release_activations: PyTorch frees a
// pass's activations when it ends, rlforge's engines keep theirs reserved between passes unless released).
#pragma once

#include "engine/engine_config.h"

namespace rf::engine {

struct OffloadSet {
  bool params = false;     // the f32 master weights and the compute (bf16) copy
  bool grads = false;      // the GradBuffer
  bool optimizer = false;  // the AdamW moments of this rank's shard
  bool activations = false;  // the saved activations and the backward's workspace: scratch, not copied

  // Every part of the state (activations are no state).
  static OffloadSet all() { return {.params = true, .grads = true, .optimizer = true}; }
  bool any() const { return params || grads || optimizer || activations; }
  bool operator==(const OffloadSet&) const = default;
};

// What the config's megatron block asks to offload between uses.
inline OffloadSet configured_offload(const EngineConfig& config) {
  return {.params = config.param_offload,
          .grads = config.grad_offload,
          .optimizer = config.optimizer_offload,
          .activations = config.release_activations};
}

}  // namespace rf::engine
