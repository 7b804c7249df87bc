// ActivationPlan: what a pipeline stage's model chunks keep from a micro-batch's forward for its backward, layer
// by layer, and what they hold once besides (the recompute scratch, the offloaded layers in transit): a pure
// function of the model config, the local shapes, the chunks' layers, the recompute policy (recompute_policy.h) and
// the activation offload (CausalLm::set_activation_offload), counted from the same tensor
// lists the blocks allocate from (saved_tensors.h) and in the tracker's units (tensor_allocation.h). So a chunk's
// activations in the MemoryTracker are exactly scratch_bytes + the micro-batches in flight's slot bytes; how many
// are in flight at the peak is the schedule's (engine/pipeline/pipeline_simulator.h weighs them by slot_bytes).
// TrainEngine prints the table at start-up and a test holds the tracker's peak to it.
// Not counted: the pipeline's p2p buffers and the workspace (gradients of activations, the TP shard statistics),
// which the tracker keeps apart.
// Legend: N a micro-batch's capacity in tokens, n this rank's rows of the residual stream (N / TP with SP), C hidden.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/recompute_policy.h"

namespace rf::model {

struct LayerActivations {
  int64_t hf_layer = 0;
  enum class Kind : uint8_t { saved, group_input, recomputed } kind = Kind::saved;
  int64_t bytes = 0;     // per micro-batch in flight
  std::string kept;      // what it keeps, e.g. "input, mid, attention: q k v lse, mlp: gate up"
  std::string discarded;  // what selective recompute discards ("" with none)
  bool offloaded = false;  // on the host tier between its forward and its backward
};

struct ChunkActivations {
  std::vector<LayerActivations> layers;
  int64_t output_bytes = 0;   // the chunk's output (the last layer's residual stream), per micro-batch
  int64_t head_bytes = 0;     // the head's, per micro-batch on the chunk with the head
  // Once per chunk on the device tier: a recomputed group's, the discarded tensors', whole group inputs, and the
  // two offloaded layers' that are there at once (the running one and the next, written or prefetched).
  int64_t scratch_bytes = 0;
  std::string scratch_holds;  // what of the above it has, for the table
  int64_t layers_bytes() const;     // per micro-batch on the device tier: every layer's but the offloaded, the output
  int64_t offloaded_bytes() const;  // per micro-batch on the host tier
  int64_t slot_bytes() const { return layers_bytes() + head_bytes; }
};

struct ActivationPlan {
  std::vector<ChunkActivations> chunks;
  int64_t scratch_bytes() const;
  std::vector<int64_t> slot_bytes() const;  // per chunk, what one micro-batch in flight on it keeps
  // scratch_bytes + the in-flight micro-batches' peak (their slot bytes summed at the schedule's worst moment).
  int64_t peak_bytes(int64_t in_flight_peak_bytes) const { return scratch_bytes() + in_flight_peak_bytes; }
  // One line per run of layers that keep the same, then the chunk totals and the stage's peak.
  std::string table(int64_t in_flight_peak_bytes, std::string_view in_flight) const;
};

// offloaded_layers: each chunk's first that many layers offload their activations.
ActivationPlan plan_activations(const ModelConfig& config, const std::vector<ModelSpan>& chunks,
                                const ActivationShape& shape, const RecomputePolicy& policy,
                                int64_t offloaded_layers = 0);

}  // namespace rf::model
