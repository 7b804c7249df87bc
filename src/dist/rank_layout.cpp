#include "dist/rank_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace rf::dist {
namespace {

constexpr std::array<Axis, kNumAxes> kAxes = {Axis::tp, Axis::cp, Axis::ep, Axis::dp, Axis::pp};

std::vector<Axis> parse_order(const std::string& order) {
  std::vector<Axis> axes;
  size_t start = 0;
  while (start <= order.size()) {
    const size_t end = std::min(order.find('-', start), order.size());
    const std::string_view token = std::string_view(order).substr(start, end - start);
    const auto* axis = std::find_if(kAxes.begin(), kAxes.end(), [&](Axis a) { return axis_name(a) == token; });
    if (axis == kAxes.end())
      throw ConfigError("order", fmt::format("'{}': unknown token '{}' (expected tp, cp, ep, dp, pp joined by '-')",
                                             order, token));
    if (std::find(axes.begin(), axes.end(), *axis) != axes.end())
      throw ConfigError("order", fmt::format("'{}': '{}' appears twice", order, token));
    axes.push_back(*axis);
    start = end + 1;
  }
  return axes;
}

// W must be a multiple of the product of the named sizes; the error names every key of the product
// and is keyed by the first of them that is not 1 (the likeliest to be wrong).
void check_divides(int world_size, std::initializer_list<std::pair<const char*, int>> factors) {
  int product = 1;
  for (const auto& [key, size] : factors) product *= size;
  if (world_size % product == 0) return;
  std::string keys, sizes;
  const char* blame = nullptr;
  for (const auto& [key, size] : factors) {
    keys += fmt::format("{}{}", keys.empty() ? "" : " x ", key);
    sizes += fmt::format("{}{}", sizes.empty() ? "" : " x ", size);
    if (size != 1 && blame == nullptr) blame = key;
  }
  throw ConfigError(blame, fmt::format("{} = {} = {} does not divide the world size {}", keys, sizes, product,
                                       world_size));
}

std::array<int, kNumAxes> dense_sizes(const ParallelDims& d) {
  const int dp = d.world_size / (d.tensor_model_parallel_size * d.context_parallel_size *
                                 d.pipeline_model_parallel_size);
  return {d.tensor_model_parallel_size, d.context_parallel_size, 1, dp, d.pipeline_model_parallel_size};
}

std::array<int, kNumAxes> expert_sizes(const ParallelDims& d) {
  const int etp = d.expert_tensor_size();
  const int edp = d.world_size / (etp * d.expert_model_parallel_size * d.pipeline_model_parallel_size);
  return {etp, 1, d.expert_model_parallel_size, edp, d.pipeline_model_parallel_size};
}

ParallelDims validated(ParallelDims dims) {
  dims.validate();
  return dims;
}

}  // namespace

std::string_view axis_name(Axis axis) {
  switch (axis) {
    case Axis::tp: return "tp";
    case Axis::cp: return "cp";
    case Axis::ep: return "ep";
    case Axis::dp: return "dp";
    case Axis::pp: return "pp";
  }
  return "?";
}

std::string_view group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::tp: return "tp";
    case GroupKind::cp: return "cp";
    case GroupKind::dp: return "dp";
    case GroupKind::dp_cp: return "dp_cp";
    case GroupKind::pp: return "pp";
    case GroupKind::mp: return "mp";
    case GroupKind::tp_cp: return "tp_cp";
    case GroupKind::tp_dp: return "tp_dp";
    case GroupKind::tp_dp_cp: return "tp_dp_cp";
    case GroupKind::embedding: return "embedding";
    case GroupKind::position_embedding: return "position_embedding";
    case GroupKind::ep: return "ep";
    case GroupKind::etp: return "etp";
    case GroupKind::edp: return "edp";
    case GroupKind::tp_ep: return "tp_ep";
    case GroupKind::tp_ep_pp: return "tp_ep_pp";
  }
  return "?";
}

int ParallelDims::expert_tensor_size() const {
  return expert_tensor_parallel_size == 0 ? tensor_model_parallel_size : expert_tensor_parallel_size;
}

void ParallelDims::validate() const {
  const std::pair<const char*, int> sizes[] = {
      {"world_size", world_size},
      {"tensor_model_parallel_size", tensor_model_parallel_size},
      {"context_parallel_size", context_parallel_size},
      {"pipeline_model_parallel_size", pipeline_model_parallel_size},
      {"expert_model_parallel_size", expert_model_parallel_size}};
  for (const auto& [key, size] : sizes)
    if (size < 1) throw ConfigError(key, fmt::format("must be >= 1, got {}", size));
  if (expert_tensor_parallel_size < 0)
    throw ConfigError("expert_tensor_parallel_size",
                      fmt::format("must be >= 1 (or 0: tensor_model_parallel_size), got {}", expert_tensor_parallel_size));
  const std::vector<Axis> axes = parse_order(order);
  check_divides(world_size, {{"tensor_model_parallel_size", tensor_model_parallel_size},
                             {"context_parallel_size", context_parallel_size},
                             {"pipeline_model_parallel_size", pipeline_model_parallel_size}});
  check_divides(world_size, {{"expert_tensor_parallel_size", expert_tensor_size()},
                             {"expert_model_parallel_size", expert_model_parallel_size},
                             {"pipeline_model_parallel_size", pipeline_model_parallel_size}});
  // An axis the order leaves out is appended with size 1; one of size > 1 has no place (Megatron's rule).
  const std::array<int, kNumAxes> dense = dense_sizes(*this), expert = expert_sizes(*this);
  for (Axis axis : kAxes) {
    const int size = std::max(dense[size_t(axis)], expert[size_t(axis)]);
    if (size > 1 && std::find(axes.begin(), axes.end(), axis) == axes.end())
      throw ConfigError("order", fmt::format("'{}' leaves out {}, whose size is {}", order, axis_name(axis), size));
  }
}

RankLayout::Grid::Grid(const std::vector<Axis>& named_order, std::array<int, kNumAxes> axis_sizes)
    : order(named_order), sizes(axis_sizes) {
  for (Axis axis : kAxes)
    if (std::find(order.begin(), order.end(), axis) == order.end()) order.push_back(axis);
}

// Megatron's generate_masked_orthogonal_rank_groups: `place` turns an index into a rank by writing its
// mixed-radix digits (over `radix`, first fastest) at the given strides.
std::vector<std::vector<int>> RankLayout::Grid::groups(std::initializer_list<Axis> axes) const {
  std::vector<int> member_radix, member_stride, group_radix, group_stride;
  int stride = 1;
  for (Axis axis : order) {
    const bool varies = std::find(axes.begin(), axes.end(), axis) != axes.end();
    (varies ? member_radix : group_radix).push_back(sizes[size_t(axis)]);
    (varies ? member_stride : group_stride).push_back(stride);
    stride *= sizes[size_t(axis)];
  }
  auto place = [](int index, const std::vector<int>& radix, const std::vector<int>& strides) {
    int rank = 0;
    for (size_t i = 0; i < radix.size(); ++i) {
      rank += (index % radix[i]) * strides[i];
      index /= radix[i];
    }
    return rank;
  };
  int group_size = 1;
  for (int r : member_radix) group_size *= r;
  std::vector<std::vector<int>> result(size_t(stride / group_size));
  for (int g = 0; g < int(result.size()); ++g)
    for (int j = 0; j < group_size; ++j)
      result[size_t(g)].push_back(place(g, group_radix, group_stride) + place(j, member_radix, member_stride));
  return result;
}

RankLayout::RankLayout(ParallelDims dims)
    : dims_(validated(std::move(dims))),
      dense_(parse_order(dims_.order), dense_sizes(dims_)),
      expert_(parse_order(dims_.order), expert_sizes(dims_)) {
  if (!dims_.order.ends_with("pp") && dims_.pipeline_model_parallel_size > 1 && expert_data_parallel_size() != data_parallel_size())
    throw ConfigError("order", fmt::format("'{}' does not end in pp, so with pipeline_model_parallel_size {} the "
                                           "expert data-parallel size ({}) must equal the data-parallel size ({})",
                                           dims_.order, dims_.pipeline_model_parallel_size,
                                           expert_data_parallel_size(), data_parallel_size()));
  if (dense_.groups({Axis::pp}) != expert_.groups({Axis::pp}))
    throw ConfigError("order", fmt::format("'{}' gives the expert layers other pipelines than the dense layers",
                                           dims_.order));
}

std::vector<std::vector<int>> RankLayout::groups(GroupKind kind) const {
  switch (kind) {
    case GroupKind::tp: return dense_.groups({Axis::tp});
    case GroupKind::cp: return dense_.groups({Axis::cp});
    case GroupKind::dp: return dense_.groups({Axis::dp});
    case GroupKind::dp_cp: return dense_.groups({Axis::dp, Axis::cp});
    case GroupKind::pp: return dense_.groups({Axis::pp});
    case GroupKind::mp: return dense_.groups({Axis::tp, Axis::pp});
    case GroupKind::tp_cp: return dense_.groups({Axis::tp, Axis::cp});
    case GroupKind::tp_dp: return dense_.groups({Axis::tp, Axis::dp});
    case GroupKind::tp_dp_cp: return dense_.groups({Axis::tp, Axis::dp, Axis::cp});
    case GroupKind::embedding:
    case GroupKind::position_embedding: {
      std::vector<std::vector<int>> result;
      for (const std::vector<int>& pipeline : dense_.groups({Axis::pp})) {
        result.push_back({pipeline.front()});
        if (kind == GroupKind::embedding && pipeline.size() > 1) result.back().push_back(pipeline.back());
      }
      return result;
    }
    case GroupKind::ep: return expert_.groups({Axis::ep});
    case GroupKind::etp: return expert_.groups({Axis::tp});
    case GroupKind::edp: return expert_.groups({Axis::dp});
    case GroupKind::tp_ep: return expert_.groups({Axis::tp, Axis::ep});
    case GroupKind::tp_ep_pp: return expert_.groups({Axis::tp, Axis::ep, Axis::pp});
  }
  return {};
}

GroupMembership RankLayout::membership(GroupKind kind, int rank) const {
  RF_CHECK(rank >= 0 && rank < world_size(), "rank {} is not in a world of {}", rank, world_size());
  std::vector<std::vector<int>> all = groups(kind);
  for (size_t g = 0; g < all.size(); ++g) {
    const auto it = std::find(all[g].begin(), all[g].end(), rank);
    if (it != all[g].end()) return {int(g), int(it - all[g].begin()), std::move(all[g])};
  }
  return {};
}

std::string RankLayout::label(int rank) const {
  std::string label = fmt::format("rank {}", rank);
  const std::pair<Axis, GroupKind> axes[] = {
      {Axis::tp, GroupKind::tp}, {Axis::cp, GroupKind::cp}, {Axis::dp, GroupKind::dp}, {Axis::pp, GroupKind::pp}};
  for (const auto& [axis, kind] : axes)
    if (dense_.sizes[size_t(axis)] > 1) label += fmt::format(" {}={}", axis_name(axis), membership(kind, rank).index);
  return label;
}

}  // namespace rf::dist
