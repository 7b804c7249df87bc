// ShardGatherer: the distributed optimizer's parameter all-gather (megatron.md §4.4, step 7). Once each
// DP rank has updated its shard (its chunk of every bucket of a BucketPlan), every rank gets every chunk
// from its owner, in place in a flat buffer laid out like the plan's. MPI cannot gather from a part of
// its own output, so each rank's chunks are first copied into a staging buffer of 1/DP of the buffer,
// which the engine shares with the gradients' reduce-scatter (they never run at once; an in-place
// all-gather in dist would remove it). The buckets' all-gathers run concurrently.
// Tests gather the reduced gradient shards with it too.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "optim/bucket_plan.h"

namespace rf::engine {

class ShardGatherer {
 public:
  // `plan` and `staging` (plan.shard_numel() elements of the gathered buffers' dtype, used only inside
  // gather()) are kept by reference.
  ShardGatherer(const optim::BucketPlan& plan, TensorView staging, dist::ProcessGroup& dp, MemoryTracker* tracker);

  // Before: this rank's chunks of `flat` hold its values. After: every chunk holds its owner's.
  // Nothing to do without sharding.
  void gather(TensorView flat);

  // The same in two halves, for overlapping the gather with the next forward (overlap_param_gather):
  // start() launches every bucket's all-gather, lowest offsets first (the order a forward reads
  // them); complete_below(end) waits for the buckets that hold any of [0, end) of the buffer, polls
  // the others (MPI progresses only inside MPI calls), and returns the [start, start + numel) ranges
  // of `flat` completed by this call. `flat` must stay alive until everything is complete.
  void start(TensorView flat);
  std::vector<std::pair<int64_t, int64_t>> complete_below(int64_t end);
  bool pending() const { return pending_; }

 private:
  const optim::BucketPlan& plan_;
  dist::ProcessGroup& dp_;
  TensorView staging_;  // this rank's chunks, in shard order
  Tensor tail_;     // the padded tail bucket's output (when the shards do not divide the buffer)
  std::vector<dist::CommHandle> handles_;  // per bucket
  std::vector<bool> done_;                 // per bucket, while a gather is pending
  TensorView flat_;                        // the buffer being gathered
  bool pending_ = false;
};

}  // namespace rf::engine
