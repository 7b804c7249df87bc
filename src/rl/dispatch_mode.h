// Dispatch modes as data (DESIGN §5, spec/verl.md §3.8). A role's method is called on every rank of
// the role; its dispatch mode says which piece of the controller's batch each rank receives and its
// collect mode whose outputs make up the result. Here a mode is a pure function from the layout of the
// role's ranks to a DispatchPlan: the batch is cut into num_chunks equal chunks, rank r receives chunk
// chunk_of_rank[r], and chunk c of the result is the output of rank collect_rank_of_chunk[c].
//
//   mode                      chunks        rank (tp, cp, dp, pp) receives    collected from
//   ONE_TO_ALL                1             the whole batch                  rank 0
//   DP_COMPUTE_PROTO          world size    chunk r (its own rank)           every rank, in rank order
//   MEGATRON_COMPUTE_PROTO    DP            chunk dp: the TP, CP and PP      tp = 0, cp = 0, last pp stage
//                                           ranks of a replica share it      of each replica
//   MEGATRON_PP_AS_DP_PROTO   PP * DP * CP  chunk (cp * DP + dp) * PP + pp   tp = 0 of each chunk
//
// MEGATRON_PP_AS_DP_PROTO is verl v0.4's (CP counted as data too). verl's ONE_TO_ALL collects the list of
// every rank's outputs; every rank computed on the same input, so the result takes rank 0's.
// The RL step applies a plan to its batch in trainer/role_dispatch.h (which ranks compute which responses,
// whose outputs every rank receives).
#pragma once

#include <string_view>
#include <vector>

#include "dist/rank_layout.h"

namespace rf::rl {

enum class DispatchMode : uint8_t { one_to_all, dp_compute_proto, megatron_compute_proto, megatron_pp_as_dp_proto };
std::string_view dispatch_mode_name(DispatchMode mode);  // verl's: "MEGATRON_COMPUTE_PROTO", ...

// Where one rank of the role sits on the dense parallel axes.
struct RankCoords {
  int tp = 0;
  int cp = 0;
  int dp = 0;
  int pp = 0;
};

// The role's ranks as the dispatcher sees them: the axis sizes and, for role rank r, ranks[r].
// Built from a RankLayout for real runs; tests also write them by hand.
struct DispatchLayout {
  int tp_size = 1;
  int cp_size = 1;
  int dp_size = 1;
  int pp_size = 1;
  std::vector<RankCoords> ranks;

  static DispatchLayout from_rank_layout(const dist::RankLayout& layout);
  int world_size() const { return int(ranks.size()); }
  // Sizes >= 1, one rank per (tp, cp, dp, pp) and every coordinate inside its axis; the error names
  // the offending rank or size.
  void validate() const;
};

struct DispatchPlan {
  DispatchMode mode = DispatchMode::one_to_all;
  int64_t num_chunks = 1;
  std::vector<int64_t> chunk_of_rank;     // by role rank
  std::vector<int> collect_rank_of_chunk;  // by chunk
};

// Validates the layout.
DispatchPlan make_dispatch_plan(DispatchMode mode, const DispatchLayout& layout);

}  // namespace rf::rl
