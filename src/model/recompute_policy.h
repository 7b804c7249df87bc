// Megatron's full activation recompute (megatron.md §7.1) over one model chunk's decoder layers: a recomputed
// layer keeps nothing of a micro-batch's forward but, for the first layer of its group, the group's input
// (the residual stream); its backward re-runs the group's forward from that input into one group's scratch,
// then back-propagates through it. `uniform` splits the chunk's layers into consecutive groups of
// recompute_num_layers (the last may be shorter); `block` recomputes each of the chunk's first
// recompute_num_layers layers on its own and saves the rest as usual. The forward re-run reads the same
// inputs and weights with the same kernels, so every gradient is bit-identical to saving everything.
// Not here: the config keys (engine/engine_config.h), selective recompute.
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

struct RecomputePolicy {
  bool full = false;  // recompute_granularity: full
  RecomputeMethod method = RecomputeMethod::uniform;
  int64_t num_layers = 0;  // recompute_num_layers (>= 1 with full)
};

// The groups [begin, end) of a chunk's layers that recompute, ascending; none without full recompute.
struct RecomputeGroups {
  std::vector<std::pair<int64_t, int64_t>> groups;
  bool recomputes(int64_t layer) const { return group_of(layer) != nullptr; }
  const std::pair<int64_t, int64_t>* group_of(int64_t layer) const;  // null: saved as usual
  int64_t largest() const;                                           // layers in the largest group (0: none)
};

RecomputeGroups recompute_groups(const RecomputePolicy& policy, int64_t num_layers);

// "uniform groups of 2" / "block of the first 2 layers" / "none", for logs.
std::string describe(const RecomputePolicy& policy);

}  // namespace rf::model
