#include "optim/bucket_plan.h"

#include <algorithm>

#include "core/error.h"

namespace rf::optim {
namespace {

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

}  // namespace

int64_t GradBucket::chunk_numel_in_buffer() const {
  return std::clamp<int64_t>(start + numel - chunk_start, 0, chunk_numel);
}

BucketPlan::BucketPlan(const model::ParamLayout& layout, const std::vector<int64_t>& boundaries, int64_t bucket_size,
                       int num_shards, int shard_rank)
    : num_shards_(num_shards), shard_rank_(shard_rank) {
  RF_CHECK(num_shards >= 1 && shard_rank >= 0 && shard_rank < num_shards, "bucket plan: shard rank {} of {}",
           shard_rank, num_shards);
  RF_CHECK(bucket_size >= 1, "bucket plan: bucket_size must be at least 1 element, got {}", bucket_size);
  const int64_t total = layout.total_numel(), shards = num_shards;
  RF_CHECK(!boundaries.empty() && boundaries.front() == 0, "bucket plan: the boundaries must start at offset 0");
  for (size_t i = 1; i < boundaries.size(); ++i)
    RF_CHECK(boundaries[i] > boundaries[i - 1] && boundaries[i] < total,
             "bucket plan: boundary {} = {} must lie above the previous one ({}) and below the buffer's end ({})", i,
             boundaries[i], boundaries[i - 1], total);

  auto add_bucket = [&](int64_t start, int64_t end) {
    GradBucket b;
    b.start = start;
    b.numel = end - start;
    b.padded_numel = round_up(b.numel, shards);
    b.chunk_numel = b.padded_numel / shards;
    b.chunk_start = start + shard_rank * b.chunk_numel;
    buckets_.push_back(b);
  };
  int64_t end = total / shards * shards;
  if (end != total) add_bucket(end, total);  // the padded tail: fewer than num_shards elements
  for (size_t i = boundaries.size(); i-- > 0;) {
    const int64_t start = round_up(boundaries[i], shards);
    if (start >= end) continue;  // rounded into the bucket above
    if (end - start >= bucket_size || start == 0) {
      add_bucket(start, end);
      end = start;
    }
  }

  // The shard holds the chunks in buffer order: walk the buckets from the bottom of the buffer.
  const std::vector<model::ParamEntry>& entries = layout.entries();
  for (auto b = buckets_.rbegin(); b != buckets_.rend(); ++b) {
    b->shard_offset = shard_numel_;
    shard_numel_ += b->chunk_numel;
    const int64_t chunk_end = b->chunk_start + b->chunk_numel_in_buffer();
    for (size_t e = 0; e < entries.size(); ++e) {
      const int64_t lo = std::max(b->chunk_start, entries[e].offset);
      const int64_t hi = std::min(chunk_end, entries[e].offset + entries[e].shape.numel());
      if (lo < hi) fragments_.push_back({e, lo, b->shard_offset + (lo - b->chunk_start), hi - lo});
    }
  }
}

int64_t default_bucket_size(int64_t dp_size) { return std::max<int64_t>(40'000'000, 1'000'000 * dp_size); }

}  // namespace rf::optim
