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
  start(flat);
  complete_below(flat.numel());
}

void ShardGatherer::start(TensorView flat) {
  if (!plan_.sharded()) return;
  RF_CHECK(!pending_, "ShardGatherer::start: the previous gather is still pending");
  const std::vector<optim::GradBucket>& buckets = plan_.buckets();
  flat_ = flat;
  done_.assign(buckets.size(), false);
  pending_ = true;
  // Bucket 0 is the last in the buffer: the lowest offsets are at the back of the list.
  for (size_t i = buckets.size(); i-- > 0;) {
    const optim::GradBucket& b = buckets[i];
    const TensorView mine = staging_.slice(0, b.shard_offset, b.chunk_numel);
    if (const int64_t n = b.chunk_numel_in_buffer(); n > 0)
      copy_convert(flat.slice(0, b.chunk_start, n), mine.slice(0, 0, n));
    handles_[i] = dp_.iall_gather(mine, b.padded() ? tail_.view() : flat.slice(0, b.start, b.numel));
  }
}

std::vector<std::pair<int64_t, int64_t>> ShardGatherer::complete_below(int64_t end) {
  std::vector<std::pair<int64_t, int64_t>> completed;
  if (!pending_) return completed;
  const std::vector<optim::GradBucket>& buckets = plan_.buckets();
  bool all_done = true;
  for (size_t i = buckets.size(); i-- > 0;) {
    const optim::GradBucket& b = buckets[i];
    if (done_[i]) continue;
    if (b.start < end) {
      handles_[i].wait();
    } else if (!handles_[i].test()) {
      all_done = false;
      continue;
    }
    if (b.padded()) copy_convert(tail_.view().slice(0, 0, b.numel), flat_.slice(0, b.start, b.numel));
    done_[i] = true;
    completed.emplace_back(b.start, b.numel);
  }
  pending_ = !all_done;
  return completed;
}

}  // namespace rf::engine
