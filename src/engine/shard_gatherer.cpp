#include "engine/shard_gatherer.h"

namespace rf::engine {

ShardGatherer::ShardGatherer(const optim::BucketPlan& plan, TensorView staging, dist::ProcessGroup& dp,
                             MemoryTracker* tracker)
    : plan_(plan), dp_(dp), staging_(staging), handles_(plan.buckets().size()) {
  if (!plan.sharded()) return;
  RF_CHECK(plan.num_shards() == dp.size(), "parameter shards for {} ranks gathered over a DP group of {}",
           plan.num_shards(), dp.size());
  RF_CHECK(staging.numel() == plan.shard_numel(), "staging: expected {} elements, got {}", plan.shard_numel(),
           staging.describe());
  const TensorAccount workspace{tracker, MemoryTier::device, MemoryCategory::workspace};
  for (const optim::GradBucket& b : plan.buckets())
    if (b.padded()) tail_ = Tensor({b.padded_numel}, staging.dtype(), workspace);
}

void ShardGatherer::gather(TensorView flat) {
  if (!plan_.sharded()) return;
  const std::vector<optim::GradBucket>& buckets = plan_.buckets();
  for (size_t i = 0; i < buckets.size(); ++i) {
    const optim::GradBucket& b = buckets[i];
    const TensorView mine = staging_.slice(0, b.shard_offset, b.chunk_numel);
    if (const int64_t n = b.chunk_numel_in_buffer(); n > 0)
      copy_convert(flat.slice(0, b.chunk_start, n), mine.slice(0, 0, n));
    handles_[i] = dp_.iall_gather(mine, b.padded() ? tail_.view() : flat.slice(0, b.start, b.numel));
  }
  for (dist::CommHandle& h : handles_) h.wait();
  for (const optim::GradBucket& b : buckets)
    if (b.padded()) copy_convert(tail_.view().slice(0, 0, b.numel), flat.slice(0, b.start, b.numel));
}

}  // namespace rf::engine
