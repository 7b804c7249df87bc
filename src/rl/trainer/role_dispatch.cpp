#include "rl/trainer/role_dispatch.h"

#include <numeric>

namespace rf::rl {

RoleDispatch::RoleDispatch(DispatchMode mode, const dist::ParallelContext& parallel, bool member)
    : plan_(make_dispatch_plan(mode, DispatchLayout::from_rank_layout(parallel.layout()))),
      role_rank_(member ? parallel.role().rank() : 0),
      member_(member) {}

std::vector<int64_t> RoleDispatch::contiguous_chunk(int64_t n) const {
  if (!member_) return {};
  const ContiguousShare share = contiguous_share(n, plan_.num_chunks, my_chunk());
  std::vector<int64_t> indices(static_cast<size_t>(share.count));
  std::iota(indices.begin(), indices.end(), share.first);
  return indices;
}

std::vector<int64_t> RoleDispatch::chunk(const RlBatch& batch, std::span<const int64_t> indices, bool balance) const {
  if (!member_) return {};
  return dp_shares(batch, indices, plan_.num_chunks, balance)[size_t(my_chunk())];
}

}  // namespace rf::rl
