// GradReducer: the data-parallel reduction of one rank's gradients over the buckets of a BucketPlan
// (Megatron's DDP, megatron.md §4.2-4.3). Loss functions normalise by the step's global token and
// sequence counts (LossContext), so the reduction is a SUM over the DP group, not an average.
// Without sharding each bucket is all-reduced in place. With the distributed optimizer each bucket is
// reduce-scattered and this rank's chunk of the sum is written back to its place in the GradBuffer
// (MPI cannot reduce-scatter into a part of its own input): the GradBuffer then holds the DP-reduced
// gradient where this rank's shard is, and this rank's own contributions elsewhere.
// Overlap (overlap_grad_reduce): during the step's last backward the engine reports, from CausalLm's
// grads-ready hook, from which offset up the gradients are final; a bucket that lies wholly above it
// starts its non-blocking collective at once, and every report drives the collectives in flight (MPI
// progresses an operation only inside MPI calls). finish() starts what has not started and waits for
// all: without overlap that is every bucket, after the backward.
// Not here: the TP sums (CausalLm::finish_grads), which the engine runs after finish(): sums commute,
// and TP peers own the same shard ranges.
#pragma once

#include <utility>
#include <vector>

#include "core/stopwatch.h"
#include "core/tensor.h"
#include "dist/process_group.h"
#include "model/param_store.h"
#include "optim/bucket_plan.h"

namespace rf::engine {

// When the last step's collectives ran, in seconds on the reducer's clock: each bucket's start (in the
// plan's bucket order, during the backward or in finish()), each grads-ready report (offset, time), and
// how long finish() took (the communication left exposed after the backward).
struct GradSyncTimes {
  std::vector<double> bucket_start_s;
  std::vector<std::pair<int64_t, double>> grads_ready_s;
  double finish_s = 0;
};

class GradReducer {
 public:
  // `plan` and `grads` are kept by reference; `plan` is sharded over `dp` or not sharded. A sharded
  // plan's reduce-scatters write into `shard_staging` (plan.shard_numel() elements of the gradients'
  // dtype, kept by reference): from the first bucket's start to the end of finish() only, so the
  // engine lends the same buffer to the parameter all-gather (shard_gatherer.h).
  GradReducer(const optim::BucketPlan& plan, const model::GradBuffer& grads, dist::ProcessGroup& dp,
              TensorView shard_staging, MemoryTracker* tracker);

  // Backward has written the final values of every gradient at offsets >= `offset`.
  void grads_ready(int64_t offset);
  void finish();
  void reset();  // after the gradients were zeroed: the next step's reductions may start
  bool started() const { return started_; }  // a collective was started since the last reset
  const GradSyncTimes& times() const { return times_; }

 private:
  void begin_step_times();
  void start(size_t bucket);

  const optim::BucketPlan& plan_;
  TensorView flat_;
  dist::ProcessGroup& dp_;
  TensorView shard_;  // sharded: the reduce-scatters' outputs, this rank's chunks in shard order
  Tensor tail_;       // sharded: the padded tail bucket's input (when the shards do not divide the buffer)
  std::vector<dist::CommHandle> handles_;  // per bucket
  bool started_ = false;
  bool times_stale_ = false;  // times_ are the previous step's until this step's first report
  Stopwatch clock_;
  GradSyncTimes times_;
};

}  // namespace rf::engine
