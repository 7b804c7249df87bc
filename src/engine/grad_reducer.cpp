#include "engine/grad_reducer.h"

namespace rf::engine {
namespace {

// The padded tail bucket's size, or 0 when the plan has none.
int64_t padded_tail_numel(const optim::BucketPlan& plan) {
  for (const optim::GradBucket& b : plan.buckets())
    if (b.padded()) return b.padded_numel;
  return 0;
}

}  // namespace

GradReducer::GradReducer(const optim::BucketPlan& plan, const model::GradBuffer& grads, dist::ProcessGroup& dp,
                         TensorView shard_staging, MemoryTracker* tracker)
    : plan_(plan),
      flat_(grads.flat()),
      dp_(dp),
      shard_(shard_staging),
      handles_(plan.buckets().size()) {
  RF_CHECK(plan.num_shards() == 1 || plan.num_shards() == dp.size(),
           "gradient buckets sharded {} ways for a DP group of {} ranks", plan.num_shards(), dp.size());
  if (plan.sharded()) {
    RF_CHECK(shard_.numel() == plan.shard_numel() && shard_.dtype() == grads.dtype(),
             "shard_staging: expected {} elements of {}, got {}", plan.shard_numel(), dtype_name(grads.dtype()),
             shard_.describe());
    if (const int64_t tail = padded_tail_numel(plan); tail > 0)
      tail_ = Tensor({tail}, grads.dtype(), {tracker, MemoryTier::device, MemoryCategory::grads});
  }
  times_.bucket_start_s.assign(plan.buckets().size(), -1.0);
}

void GradReducer::begin_step_times() {
  if (!times_stale_) return;
  times_.bucket_start_s.assign(plan_.buckets().size(), -1.0);
  times_.grads_ready_s.clear();
  times_.finish_s = 0;
  times_stale_ = false;
}

void GradReducer::start(size_t i) {
  const optim::GradBucket& b = plan_.buckets()[i];
  started_ = true;
  times_.bucket_start_s[i] = clock_.seconds();
  TensorView in = flat_.slice(0, b.start, b.numel);
  if (!plan_.sharded()) {
    handles_[i] = dp_.iall_reduce(in, dist::ReduceOp::sum);
    return;
  }
  if (b.padded()) {  // its padding elements stay zero
    copy_convert(in, tail_.view().slice(0, 0, b.numel));
    in = tail_;
  }
  handles_[i] = dp_.ireduce_scatter(in, shard_.slice(0, b.shard_offset, b.chunk_numel));
}

void GradReducer::grads_ready(int64_t offset) {
  if (dp_.size() == 1) return;
  begin_step_times();
  times_.grads_ready_s.emplace_back(offset, clock_.seconds());
  const std::vector<optim::GradBucket>& buckets = plan_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i)
    if (times_.bucket_start_s[i] < 0 && buckets[i].start >= offset) start(i);
  for (dist::CommHandle& h : handles_) h.test();
}

void GradReducer::finish() {
  if (dp_.size() == 1) return;
  begin_step_times();
  const Stopwatch wait;
  const std::vector<optim::GradBucket>& buckets = plan_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i)
    if (times_.bucket_start_s[i] < 0) start(i);
  for (dist::CommHandle& h : handles_) h.wait();
  if (plan_.sharded())
    for (const optim::GradBucket& b : buckets)
      if (const int64_t n = b.chunk_numel_in_buffer(); n > 0)
        copy_convert(shard_.slice(0, b.shard_offset, n), flat_.slice(0, b.chunk_start, n));
  times_.finish_s = wait.seconds();
}

void GradReducer::reset() {
  started_ = false;
  times_stale_ = true;
}

}  // namespace rf::engine
