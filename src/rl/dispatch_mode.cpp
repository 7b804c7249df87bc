#include "rl/dispatch_mode.h"

#include "core/error.h"

namespace rf::rl {
namespace {

int64_t num_chunks(DispatchMode mode, const DispatchLayout& layout) {
  switch (mode) {
    case DispatchMode::one_to_all: return 1;
    case DispatchMode::dp_compute_proto: return layout.world_size();
    case DispatchMode::megatron_compute_proto: return layout.dp_size;
    case DispatchMode::megatron_pp_as_dp_proto: return int64_t(layout.pp_size) * layout.dp_size * layout.cp_size;
  }
  return 1;
}

int64_t chunk_of(DispatchMode mode, const DispatchLayout& layout, int rank) {
  const RankCoords& at = layout.ranks[size_t(rank)];
  switch (mode) {
    case DispatchMode::one_to_all: return 0;
    case DispatchMode::dp_compute_proto: return rank;
    case DispatchMode::megatron_compute_proto: return at.dp;
    case DispatchMode::megatron_pp_as_dp_proto:
      return (int64_t(at.cp) * layout.dp_size + at.dp) * layout.pp_size + at.pp;
  }
  return 0;
}

// Whether `rank`'s output is its chunk's part of the result. Exactly one rank per chunk qualifies.
bool collects(DispatchMode mode, const DispatchLayout& layout, int rank) {
  const RankCoords& at = layout.ranks[size_t(rank)];
  switch (mode) {
    case DispatchMode::one_to_all: return rank == 0;
    case DispatchMode::dp_compute_proto: return true;
    case DispatchMode::megatron_compute_proto: return at.tp == 0 && at.cp == 0 && at.pp == layout.pp_size - 1;
    case DispatchMode::megatron_pp_as_dp_proto: return at.tp == 0;
  }
  return false;
}

}  // namespace

std::string_view dispatch_mode_name(DispatchMode mode) {
  switch (mode) {
    case DispatchMode::one_to_all: return "ONE_TO_ALL";
    case DispatchMode::dp_compute_proto: return "DP_COMPUTE_PROTO";
    case DispatchMode::megatron_compute_proto: return "MEGATRON_COMPUTE_PROTO";
    case DispatchMode::megatron_pp_as_dp_proto: return "MEGATRON_PP_AS_DP_PROTO";
  }
  return "?";
}

DispatchLayout DispatchLayout::from_rank_layout(const dist::RankLayout& layout) {
  const dist::ParallelDims& dims = layout.dims();
  DispatchLayout out{.tp_size = dims.tensor_model_parallel_size,
                     .cp_size = dims.context_parallel_size,
                     .dp_size = layout.data_parallel_size(),
                     .pp_size = dims.pipeline_model_parallel_size,
                     .ranks = {}};
  // A rank's place in its single-axis group is its coordinate on that axis (rank_layout.h).
  for (int r = 0; r < layout.world_size(); ++r)
    out.ranks.push_back({.tp = layout.membership(dist::GroupKind::tp, r).index,
                         .cp = layout.membership(dist::GroupKind::cp, r).index,
                         .dp = layout.membership(dist::GroupKind::dp, r).index,
                         .pp = layout.membership(dist::GroupKind::pp, r).index});
  return out;
}

void DispatchLayout::validate() const {
  RF_CHECK(tp_size >= 1 && cp_size >= 1 && dp_size >= 1 && pp_size >= 1,
           "dispatch layout: sizes tp={} cp={} dp={} pp={}: expected each >= 1", tp_size, cp_size, dp_size, pp_size);
  const int64_t expected = int64_t(tp_size) * cp_size * dp_size * pp_size;
  RF_CHECK(int64_t(ranks.size()) == expected, "dispatch layout: ranks: expected tp*cp*dp*pp = {}, got {}", expected,
           ranks.size());
  std::vector<int> owner(size_t(expected), -1);
  for (int r = 0; r < world_size(); ++r) {
    const RankCoords& at = ranks[size_t(r)];
    RF_CHECK(at.tp >= 0 && at.tp < tp_size && at.cp >= 0 && at.cp < cp_size && at.dp >= 0 && at.dp < dp_size &&
                 at.pp >= 0 && at.pp < pp_size,
             "dispatch layout: rank {} at tp={} cp={} dp={} pp={} is outside sizes tp={} cp={} dp={} pp={}", r, at.tp,
             at.cp, at.dp, at.pp, tp_size, cp_size, dp_size, pp_size);
    const auto slot = size_t(((int64_t(at.pp) * dp_size + at.dp) * cp_size + at.cp) * tp_size + at.tp);
    RF_CHECK(owner[slot] < 0, "dispatch layout: ranks {} and {} both sit at tp={} cp={} dp={} pp={}", owner[slot], r,
             at.tp, at.cp, at.dp, at.pp);
    owner[slot] = r;
  }
}

DispatchPlan make_dispatch_plan(DispatchMode mode, const DispatchLayout& layout) {
  layout.validate();
  DispatchPlan plan{.mode = mode, .num_chunks = num_chunks(mode, layout), .chunk_of_rank = {},
                    .collect_rank_of_chunk = {}};
  plan.collect_rank_of_chunk.assign(size_t(plan.num_chunks), -1);
  for (int r = 0; r < layout.world_size(); ++r) {
    const int64_t c = chunk_of(mode, layout, r);
    plan.chunk_of_rank.push_back(c);
    if (collects(mode, layout, r)) plan.collect_rank_of_chunk[size_t(c)] = r;
  }
  return plan;
}

}  // namespace rf::rl
