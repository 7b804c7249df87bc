// Expert parallelism's token exchange (megatron.md §6.6): the routed rows of every EP rank's tokens move to the
// ranks holding their experts and the experts' outputs move back. The local side is moe_permute's expert-major
// order (experts are contiguous per EP rank, so it is EP-rank-major too); the expert side holds, for each local
// expert in turn, the rows of EP rank 0's tokens, then rank 1's, ... (each in token order): one group per local
// expert for the grouped GEMM. Both dispatchers produce that same order:
//   alltoall   the per-expert row counts are all-gathered, then one all-to-all-v moves rows ranked
//              (source rank, local expert), reordered to (local expert, source rank); combine is the inverse;
//   allgather  every rank's tokens, routing map and weights are all-gathered and each rank permutes them by its
//              local experts' columns; combine sums every rank's contributions to a token on the token's rank
//              (an all-to-all-v of each rank's rows for that rank, summed in rank order).
// Each dispatch's backward is its combine and vice versa. The counts are host vectors (one all-gather per layer:
// the grouped GEMM needs them on the host, as Megatron's sync point). Rows of any dtype; W the row width.
// Legend: N tokens, E experts, EP ranks, E_loc = E / EP local experts, J this rank's routed rows, R the rows its
// experts receive.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace rf::model {

// Megatron's moe_token_dispatcher_type.
enum class MoeDispatcher : uint8_t { alltoall, allgather };
constexpr std::array<std::pair<MoeDispatcher, std::string_view>, 2> enum_names(MoeDispatcher) {
  return {{{MoeDispatcher::alltoall, "alltoall"}, {MoeDispatcher::allgather, "allgather"}}};
}

// Where one forward's rows go: counts[q * E + e] = the rows EP rank q routes to expert e.
struct ExpertRowPlan {
  int64_t ep_size = 1, ep_rank = 0, num_experts = 0;
  std::vector<int64_t> counts;       // [EP, E], every rank's
  std::vector<int64_t> send_rows;    // [EP]: this rank's rows for rank q's experts
  std::vector<int64_t> recv_rows;    // [EP]: rank q's rows for this rank's experts
  std::vector<int64_t> local_sizes;  // [E_loc]: each local expert's rows, over every rank
  int64_t rows = 0;                  // R
  // The exchange's element counts for rows of one width, and the chunks' starts: kept so that a plan reused for
  // the next forward (the vectors keep their capacity) allocates nothing in the training step.
  std::vector<int64_t> send_elements, recv_elements, rank_major_starts, expert_major_starts;

  int64_t local_experts() const { return num_experts / ep_size; }
  int64_t first_expert() const { return ep_rank * local_experts(); }
};

// All-gathers this rank's rows per expert (tokens_per_expert_E, i64) over `ep` into `plan` (its vectors reused).
void plan_expert_rows(dist::ProcessGroup& ep, TensorView tokens_per_expert_E, ExpertRowPlan& plan);

// alltoall: local_JW (expert-major) -> expert_RW (local expert, source rank); `staging_RW` holds the rows as they
// arrive. combine_rows is the inverse (expert_RW -> local_JW).
void dispatch_rows(dist::ProcessGroup& ep, ExpertRowPlan& plan, TensorView local_JW, TensorView staging_RW,
                   TensorView expert_RW);
void combine_rows(dist::ProcessGroup& ep, ExpertRowPlan& plan, TensorView expert_RW, TensorView staging_RW,
                  TensorView local_JW);

}  // namespace rf::model
