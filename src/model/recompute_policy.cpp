#include "model/recompute_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace rf::model {

const std::pair<int64_t, int64_t>* RecomputeGroups::group_of(int64_t layer) const {
  for (const auto& group : groups)
    if (layer >= group.first && layer < group.second) return &group;
  return nullptr;
}

int64_t RecomputeGroups::largest() const {
  int64_t most = 0;
  for (const auto& [begin, end] : groups) most = std::max(most, end - begin);
  return most;
}

RecomputeGroups recompute_groups(const RecomputePolicy& policy, int64_t num_layers) {
  RecomputeGroups out;
  if (!policy.full || policy.num_layers <= 0) return out;
  if (policy.method == RecomputeMethod::uniform) {
    for (int64_t begin = 0; begin < num_layers; begin += policy.num_layers)
      out.groups.emplace_back(begin, std::min(begin + policy.num_layers, num_layers));
  } else {
    for (int64_t layer = 0; layer < std::min(policy.num_layers, num_layers); ++layer)
      out.groups.emplace_back(layer, layer + 1);
  }
  return out;
}

ResidualKept residual_kept(const RecomputeGroups& groups, bool distributed, int64_t l) {
  const auto* group = groups.group_of(l);
  if (!group) return ResidualKept::whole;
  if (group->first != l) return ResidualKept::none;
  return distributed ? ResidualKept::tp_slice : ResidualKept::whole;
}

namespace {

std::string describe(const SelectiveRecompute& modules) {
  std::string names;
  for (const auto& [on, name] : {std::pair{modules.core_attn, "core_attn"}, std::pair{modules.layernorm, "layernorm"},
                                 std::pair{modules.activation, "activation"}, std::pair{modules.mlp, "mlp"},
                                 std::pair{modules.moe, "moe"}})
    if (on) names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  return names;
}

}  // namespace

std::string describe(const RecomputePolicy& policy) {
  std::string out;
  if (policy.full)
    out = policy.method == RecomputeMethod::uniform
              ? fmt::format("full, uniform groups of {} layers", policy.num_layers)
              : fmt::format("full, block: each of the first {} layers of a chunk", policy.num_layers);
  if (policy.full && policy.distribute_saved_activations) out += ", group inputs distributed over TP";
  if (policy.selective.any())
    out += fmt::format("{}selective: {}", out.empty() ? "" : "; saving layers ", describe(policy.selective));
  return out.empty() ? "none" : out;
}

}  // namespace rf::model
