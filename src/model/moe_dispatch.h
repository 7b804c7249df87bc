// The routed rows' way to this rank's experts and back (megatron.md §6.6), by either of Megatron's dispatchers.
// alltoall, through the groups that apply:
//   EP   the rows of every EP rank's tokens move to the ranks holding their experts by one all-to-all-v (the
//        per-expert row counts all-gathered first, as Megatron's sync point: the grouped GEMM needs them on the host);
//   ETP  with experts split over TP ranks (expert tensor parallelism, §6.7) and sequence parallel, each ETP rank's
//        rows are all-gathered, so every FFN shard of an expert sees all of its rows; each shard's outputs are partial
//        sums, completed by summing over ETP on the way back. Without SP the ETP ranks hold the same tokens: nothing
//        is gathered, the partial outputs are all-reduced.
// The local side is moe_permute's expert-major order (experts are contiguous per EP rank, so it is EP-rank-major
// too); the expert side holds, for each local expert in turn, ETP rank 0's rows, then rank 1's, ... and within
// each, EP rank 0's tokens' rows, then rank 1's, ... (each in token order): one group per local expert for the
// grouped GEMM. Each way's backward is the other way (the ETP sum's is the gather, and vice versa).
// allgather: every token of the group (EP ranks, and ETP ranks with SP) is gathered with its routing map and weights,
// each rank permutes them by its local experts' columns (rows ordered by local expert, then source rank, then
// token), and the outputs, unpermuted over all gathered tokens, are summed back to each token's rank. It moves every
// token rather than its routed rows.
// Rows of any dtype; W the row width.
// Legend: N tokens, E experts, EP / ETP the group sizes, E_loc = E / EP local experts, J this rank's routed rows,
// R the rows the EP exchange brings, R' the rows the experts run on (R, or over every ETP rank with SP).
#pragma once

#include <array>
#include <cstdint>
#include <span>
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

// Row chunks (rank p, local expert e) of rows[p * experts + e] rows each, and where each starts in rank-major
// order (p slowest: as they arrive from the ranks) and in expert-major order (e slowest: each expert contiguous).
struct ChunkOrder {
  int64_t ranks = 1, experts = 0;
  std::vector<int64_t> rows;  // [ranks, experts]
  std::vector<int64_t> rank_major_starts, expert_major_starts;

  // The starts, from `rows` (the vectors keep their capacity).
  void place();
  // Copies every chunk of `from` to its place in `to`: rank-major to expert-major, or back.
  void reorder(TensorView from, TensorView to, bool from_rank_major) const;
};

// Where one forward's rows go over EP: counts[q * E + e] = the rows EP rank q routes to expert e. A plan reused for
// the next forward (its vectors keep their capacity) allocates nothing in the training step.
struct ExpertRowPlan {
  int64_t ep_size = 1, ep_rank = 0, num_experts = 0;
  std::vector<int64_t> counts;       // [EP, E], every rank's
  std::vector<int64_t> send_rows;    // [EP]: this rank's rows for rank q's experts
  std::vector<int64_t> recv_rows;    // [EP]: rank q's rows for this rank's experts
  std::vector<int64_t> local_sizes;  // [E_loc]: each local expert's rows, over every rank
  int64_t rows = 0;                  // R
  std::vector<int64_t> send_elements, recv_elements;  // the exchange's element counts for rows of one width
  ChunkOrder chunks;                                  // (source EP rank, local expert)

  int64_t local_experts() const { return num_experts / ep_size; }
  int64_t first_expert() const { return ep_rank * local_experts(); }
};

// The rows every ETP rank brings to this rank's local experts (its local_sizes after the EP exchange).
struct ExpertTpPlan {
  std::vector<int64_t> local_sizes;  // [E_loc]: each local expert's rows, over every ETP rank
  int64_t rows = 0;                  // R'
  std::vector<int64_t> rank_rows;      // [ETP]: each rank's rows
  std::vector<int64_t> rank_elements;  // their elements, for rows of one width
  ChunkOrder chunks;                   // (source ETP rank, local expert)
};

// Megatron's allgather dispatcher's exchange (§6.6): the tokens (rows of any width) of every rank of the group,
// gathered in rank order, and back, each rank's rows summed over the group (the process group has no uneven
// reduce-scatter: an all-reduce, then this rank's rows).
struct TokenGatherPlan {
  std::vector<int64_t> tokens;   // [ranks]: each rank's tokens
  int64_t total = 0, first = 0;  // all ranks' tokens; this rank's first in the gathered order
  std::vector<int64_t> elements;
};
// All-gathers each rank's token count into `plan` (its vectors reused).
void plan_token_gather(dist::ProcessGroup& group, int64_t tokens, TokenGatherPlan& plan);
// all_TW = every rank's local_NW, in rank order.
void gather_tokens(dist::ProcessGroup& group, TokenGatherPlan& plan, TensorView local_NW, TensorView all_TW);
// all_TW summed over the group in place; this rank's rows of it copied into local_NW.
void sum_tokens_to_owners(dist::ProcessGroup& group, const TokenGatherPlan& plan, TensorView all_TW,
                          TensorView local_NW);

// This rank's routed rows to its experts and back (the alltoall dispatcher's). Holds references to the plans it
// fills (kept for backward).
class ExpertExchange {
 public:
  // ep / etp: null when the experts are not split over that group. etp_gathers: sequence parallel (the ETP ranks
  // route different tokens).
  ExpertExchange(dist::ProcessGroup* ep, dist::ProcessGroup* etp, bool etp_gathers, ExpertRowPlan& ep_plan,
                 ExpertTpPlan& etp_plan);

  // Rows move (EP, or ETP with SP); else the experts run on the local rows as they are.
  bool moves_rows() const { return ep_ != nullptr || etp_gathers_; }
  // All-gathers the row counts (tokens_per_expert_E, i64: this rank's rows per expert) into the plans.
  void plan(TensorView tokens_per_expert_E);
  // The rows the local experts run on (R') and each one's share (valid after plan()).
  int64_t expert_rows() const;
  std::span<const int64_t> expert_sizes() const;
  // The rows the EP exchange brings (R), before any ETP gather.
  int64_t exchanged_rows() const;

  // local_JW -> expert_RW ([R', W]). middle_RW ([R, W]) holds the EP exchange's output when the rows go on to an
  // ETP gather; staging ([R', W]) the rows as they arrive.
  void to_experts(TensorView local_JW, TensorView middle_RW, TensorView staging, TensorView expert_RW);
  // expert_RW (each ETP shard's partial sums: summed in place over ETP) back to this rank's J rows, the buffers as
  // to_experts': local_JW, or expert_RW itself when no rows move (only the partial sums are summed).
  TensorView from_experts(TensorView expert_RW, TensorView middle_RW, TensorView staging, TensorView local_JW);
  // Each way in two halves, so that other work runs while the rows travel (moe_shared_expert_overlap): start sends
  // (the EP all-to-all, non-blocking), finish waits and places the rows; the same buffers as the whole way's, left
  // alone in between.
  dist::CommHandle start_to_experts(TensorView local_JW, TensorView staging);
  void finish_to_experts(dist::CommHandle& pending, TensorView local_JW, TensorView middle_RW, TensorView staging,
                         TensorView expert_RW);
  dist::CommHandle start_from_experts(TensorView expert_RW, TensorView middle_RW, TensorView staging,
                                      TensorView local_JW);
  TensorView finish_from_experts(dist::CommHandle& pending);

 private:
  int64_t local_rows() const;  // J: this rank's routed rows (the EP plan's)

  dist::ProcessGroup* ep_;
  dist::ProcessGroup* etp_;
  bool etp_gathers_;
  ExpertRowPlan& ep_plan_;
  ExpertTpPlan& etp_plan_;
  TensorView returned_;  // where start_from_experts leaves this rank's rows
};

}  // namespace rf::model
