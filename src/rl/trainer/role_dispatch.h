// A role method's dispatch mode (verl's @register(dispatch_mode=...), spec verl.md §3.8) applied to the RL
// step's RlBatch. The plan of rl/dispatch_mode.h over the role's layout says which chunk of the work this rank
// computes and whether its outputs are the ones collected for that chunk. The controller is SPMD and every rank
// keeps the whole batch, so dispatching is this rank choosing its chunk's indices, and collecting is bringing
// the collect ranks' outputs to every rank (rl_transfer.h; rl_roles.cpp's run_pass).
#pragma once

#include <span>
#include <vector>

#include "dist/parallel_context.h"
#include "rl/dispatch_mode.h"
#include "rl/trainer/rl_batch.h"

namespace rf::rl {

class RoleDispatch {
 public:
  // `parallel` is the role's context; `member` is false off the role's ranks, which compute and collect nothing.
  RoleDispatch(DispatchMode mode, const dist::ParallelContext& parallel, bool member);

  bool member() const { return member_; }
  int64_t num_chunks() const { return plan_.num_chunks; }
  // This rank's chunk of n items cut into contiguous runs (contiguous_share): the rollout's prompts.
  std::vector<int64_t> contiguous_chunk(int64_t n) const;
  // This rank's chunk of the responses `indices` (dp_shares: contiguous runs, or with `balance` equal counts
  // balanced by token workload).
  std::vector<int64_t> chunk(const RlBatch& batch, std::span<const int64_t> indices, bool balance) const;
  // Whether this rank's outputs make up its chunk of the result.
  bool collects() const { return member_ && plan_.collect_rank_of_chunk[size_t(my_chunk())] == role_rank_; }

 private:
  int64_t my_chunk() const { return plan_.chunk_of_rank[size_t(role_rank_)]; }

  DispatchPlan plan_;
  int role_rank_;
  bool member_;
};

}  // namespace rf::rl
