#include "model/moe_dispatch.h"

#include <cstring>
#include <utility>

namespace rf::model {
namespace {

// Copies the row chunks of `from` into `to`, chunk (q, e) (counts[q * E + first + e] rows) moving from its start in
// the rank-major order (q slowest) to its start in the expert-major one, or back.
void reorder(const ExpertRowPlan& plan, TensorView from, TensorView to, bool from_rank_major) {
  const int64_t EP = plan.ep_size, E_loc = plan.local_experts(), first = plan.first_expert();
  const size_t row_bytes = size_t(from.size(1)) * from.element_size();
  const auto* src = static_cast<const char*>(from.raw());
  auto* dst = static_cast<char*>(to.raw());
  for (int64_t q = 0; q < EP; ++q)
    for (int64_t e = 0; e < E_loc; ++e) {
      const size_t c = size_t(q * E_loc + e);
      const int64_t rank_row = plan.rank_major_starts[c], expert_row = plan.expert_major_starts[c];
      const int64_t rows = plan.counts[size_t(q * plan.num_experts + first + e)];
      std::memcpy(dst + size_t(from_rank_major ? expert_row : rank_row) * row_bytes,
                  src + size_t(from_rank_major ? rank_row : expert_row) * row_bytes, size_t(rows) * row_bytes);
    }
}

// The element counts of rows `width` wide, into `out` (its capacity reused).
const std::vector<int64_t>& elements(const std::vector<int64_t>& rows, int64_t width, std::vector<int64_t>& out) {
  out.assign(rows.begin(), rows.end());
  for (int64_t& n : out) n *= width;
  return out;
}

void check_rows(const TensorView& t, int64_t rows, const char* what) {
  RF_CHECK(t.rank() == 2 && t.is_contiguous() && t.size(0) >= rows, "moe dispatch {}: {} cannot hold {} rows", what,
           t.describe(), rows);
}

// J, this rank's routed rows, once the three buffers are checked to hold theirs.
int64_t checked_local_rows(const ExpertRowPlan& plan, const TensorView& local_JW, const TensorView& staging_RW,
                           const TensorView& expert_RW) {
  int64_t J = 0;
  for (int64_t n : plan.send_rows) J += n;
  check_rows(local_JW, J, "local rows");
  check_rows(staging_RW, plan.rows, "staging");
  check_rows(expert_RW, plan.rows, "expert rows");
  RF_CHECK(staging_RW.size(1) == local_JW.size(1) && expert_RW.size(1) == local_JW.size(1),
           "moe dispatch: rows of width {}, {} and {}", local_JW.size(1), staging_RW.size(1), expert_RW.size(1));
  return J;
}

}  // namespace

void plan_expert_rows(dist::ProcessGroup& ep, TensorView tokens_per_expert_E, ExpertRowPlan& plan) {
  plan.ep_size = ep.size();
  plan.ep_rank = ep.rank();
  plan.num_experts = tokens_per_expert_E.numel();
  RF_CHECK(plan.num_experts % plan.ep_size == 0, "expert parallel: {} ranks do not divide the {} experts",
           plan.ep_size, plan.num_experts);
  const int64_t EP = plan.ep_size, E = plan.num_experts, E_loc = plan.local_experts();
  plan.counts.resize(size_t(EP * E));
  ep.all_gather(tokens_per_expert_E, TensorView(plan.counts.data(), DType::i64, Shape{EP * E}));
  plan.send_rows.assign(size_t(EP), 0);
  plan.recv_rows.assign(size_t(EP), 0);
  plan.local_sizes.assign(size_t(E_loc), 0);
  plan.rows = 0;
  for (int64_t q = 0; q < EP; ++q)
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = plan.counts[size_t(q * E + e)];
      if (q == plan.ep_rank) plan.send_rows[size_t(e / E_loc)] += n;
      if (e / E_loc == plan.ep_rank) {
        plan.recv_rows[size_t(q)] += n;
        plan.local_sizes[size_t(e % E_loc)] += n;
        plan.rows += n;
      }
    }
  // Where each received chunk (source rank q, local expert e) starts in arrival order and in expert-major order.
  const int64_t first = plan.first_expert();
  plan.rank_major_starts.resize(size_t(EP * E_loc));
  plan.expert_major_starts.resize(size_t(EP * E_loc));
  int64_t at = 0;
  for (int64_t q = 0; q < EP; ++q)
    for (int64_t e = 0; e < E_loc; ++e)
      plan.rank_major_starts[size_t(q * E_loc + e)] = std::exchange(at, at + plan.counts[size_t(q * E + first + e)]);
  at = 0;
  for (int64_t e = 0; e < E_loc; ++e)
    for (int64_t q = 0; q < EP; ++q)
      plan.expert_major_starts[size_t(q * E_loc + e)] = std::exchange(at, at + plan.counts[size_t(q * E + first + e)]);
}

void dispatch_rows(dist::ProcessGroup& ep, ExpertRowPlan& plan, TensorView local_JW, TensorView staging_RW,
                   TensorView expert_RW) {
  const int64_t J = checked_local_rows(plan, local_JW, staging_RW, expert_RW), W = local_JW.size(1);
  ep.all_to_all_v(local_JW.slice(0, 0, J).reshape({J * W}), elements(plan.send_rows, W, plan.send_elements),
                  staging_RW.slice(0, 0, plan.rows).reshape({plan.rows * W}),
                  elements(plan.recv_rows, W, plan.recv_elements));
  reorder(plan, staging_RW, expert_RW, true);
}

void combine_rows(dist::ProcessGroup& ep, ExpertRowPlan& plan, TensorView expert_RW, TensorView staging_RW,
                  TensorView local_JW) {
  const int64_t J = checked_local_rows(plan, local_JW, staging_RW, expert_RW), W = local_JW.size(1);
  reorder(plan, expert_RW, staging_RW, false);
  ep.all_to_all_v(staging_RW.slice(0, 0, plan.rows).reshape({plan.rows * W}),
                  elements(plan.recv_rows, W, plan.recv_elements), local_JW.slice(0, 0, J).reshape({J * W}),
                  elements(plan.send_rows, W, plan.send_elements));
}

}  // namespace rf::model
