// ShardGatherer: the distributed optimizer's parameter all-gather (megatron.md §4.4, step 7). Once each
// DP rank has updated its shard (its chunk of every bucket of a BucketPlan), every rank gets every chunk
// from its owner, in place in a flat buffer laid out like the plan's. MPI cannot gather from a part of
// its own output, so each rank's chunks are first copied into a staging buffer of 1/DP of the buffer,
// which the engine shares with the gradients' reduce-scatter (they never run at once; an in-place
// all-gather in dist would remove it). The buckets' all-gathers run concurrently.
// Tests gather the reduced gradient shards with it too.
#pragma once

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

 private:
  const optim::BucketPlan& plan_;
  dist::ProcessGroup& dp_;
  TensorView staging_;  // this rank's chunks, in shard order
  Tensor tail_;     // the padded tail bucket's output (when the shards do not divide the buffer)
  std::vector<dist::CommHandle> handles_;  // per bucket
};

}  // namespace rf::engine
