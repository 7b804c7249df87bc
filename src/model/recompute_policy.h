// Megatron's activation recompute (megatron.md §7) over one model chunk's decoder layers.
// Full (§7.1): a recomputed
// layer keeps nothing of a micro-batch's forward but, for the first layer of its group, the group's input
// (the residual stream); its backward re-runs the group's forward from that input into one group's scratch,
// then back-propagates through it. `uniform` splits the chunk's layers into consecutive groups of
// recompute_num_layers (the last may be shorter); `block` recomputes each of the chunk's first
// recompute_num_layers layers on its own and saves the rest as usual. The forward re-run reads the same
// inputs and weights with the same kernels, so every gradient is bit-identical to saving everything.
// Selective (§7.2, and MindSpeed's activation-function and norm recompute): every layer that saves its activations
// discards some of them in forward and recomputes them at the start of its backward from what it kept, into one
// layer's scratch the chunk shares (activation_plan.h counts it). Output-discarding, as Megatron's
// CheckpointWithoutOutput: the forward writes a discarded tensor into the scratch, its consumer reads it there, and
// nothing of it outlives the layer's forward.
// Not here: the config keys (engine/engine_config.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rf::model {

enum class RecomputeMethod : uint8_t { uniform, block };

constexpr std::array<std::pair<RecomputeMethod, std::string_view>, 2> enum_names(RecomputeMethod) {
  return {{{RecomputeMethod::uniform, "uniform"}, {RecomputeMethod::block, "block"}}};
}

// What a saving layer discards and recomputes (all false: it keeps everything).
struct SelectiveRecompute {
  bool core_attn = false;   // the attention kernel's output and softmax statistics, from the kept q, k and v
  bool layernorm = false;   // both pre-norms' outputs and statistics, from the kept residual stream
  bool activation = false;  // the MLP's SwiGLU product, from the kept gate and up projections
  bool mlp = false;         // all the MLP keeps (norm, gate, up, product), from its kept input
  // all an MoE layer's block keeps (router, routed rows, experts' activations), its forward (the dispatch's
  // exchanges included) run again from its kept input in backward: Megatron's `moe` module, moe_layer_recompute
  bool moe = false;
  bool any() const { return core_attn || layernorm || activation || mlp || moe; }
  bool operator==(const SelectiveRecompute&) const = default;
};

struct RecomputePolicy {
  bool full = false;  // recompute_granularity: full
  RecomputeMethod method = RecomputeMethod::uniform;
  int64_t num_layers = 0;  // recompute_num_layers (>= 1 with full)
  SelectiveRecompute selective;  // for the layers full recompute leaves saving
  // With full recompute at TP > 1 without sequence parallel: each TP rank keeps 1/TP of a group's input and the
  // group's recompute all-gathers it first (Megatron's distribute_saved_activations).
  bool distribute_saved_activations = false;
};

// The groups [begin, end) of a chunk's layers that recompute, ascending; none without full recompute.
struct RecomputeGroups {
  std::vector<std::pair<int64_t, int64_t>> groups;
  bool recomputes(int64_t layer) const { return group_of(layer) != nullptr; }
  const std::pair<int64_t, int64_t>* group_of(int64_t layer) const;  // null: saved as usual
  int64_t largest() const;                                           // layers in the largest group (0: none)
};

RecomputeGroups recompute_groups(const RecomputePolicy& policy, int64_t num_layers);

// What a micro-batch keeps of residual-stream entry l of a chunk (layer l's input; l = L, the chunk's output, is
// always kept whole): all of it, this TP rank's 1/TP of it (a group input with distribute_saved_activations at
// TP > 1), or nothing (inside a recomputed group).
enum class ResidualKept : uint8_t { whole, tp_slice, none };
ResidualKept residual_kept(const RecomputeGroups& groups, bool distributed, int64_t l);

// "full, uniform groups of 2 layers" / "selective: core_attn, layernorm" / "none", for logs.
std::string describe(const RecomputePolicy& policy);

}  // namespace rf::model
