// BucketPlan on a small layout whose offsets are known: buckets in reverse order closed at the first
// boundary past bucket_size, every bucket divisible by the shard count (boundaries rounded up, a padded
// tail when the count does not divide the buffer), and the shards of all ranks covering every parameter
// element exactly once.
#include "optim/bucket_plan.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"

namespace rf::optim {
namespace {

// Entries padded to 32 elements: e [0, 40) in [0, 64), l0 [64, 94), l1 [96, 146), h [160, 167); 192 in all.
model::ParamLayout small_layout() {
  model::ParamLayout layout;
  layout.add("e", {40});
  layout.add("l0", {30});
  layout.add("l1", {50});
  layout.add("h", {7});
  return layout;
}

const std::vector<int64_t> kBoundaries = {0, 64, 96, 160};
constexpr int64_t kOneBucket = std::numeric_limits<int64_t>::max();

std::vector<std::pair<int64_t, int64_t>> ranges(const BucketPlan& plan) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const GradBucket& b : plan.buckets()) out.emplace_back(b.start, b.start + b.numel);
  return out;
}

// Every shard rank's fragments: each parameter element exactly once over all ranks, none of the
// padding; within a rank, inside its shard, without overlaps, at the place its chunk gives.
void expect_shards_cover_the_parameters(const model::ParamLayout& layout, int64_t bucket_size, int num_shards) {
  SCOPED_TRACE(::testing::Message() << num_shards << " shards, bucket_size " << bucket_size);
  std::vector<int> owners(size_t(layout.total_numel()), 0);
  int64_t shard_numel = 0;
  for (int rank = 0; rank < num_shards; ++rank) {
    const BucketPlan plan(layout, kBoundaries, bucket_size, num_shards, rank);
    if (rank == 0) shard_numel = plan.shard_numel();
    EXPECT_EQ(plan.shard_numel(), shard_numel) << "every rank's shard has the same size";
    std::vector<int> used(size_t(plan.shard_numel()), 0);
    for (const ShardFragment& f : plan.fragments()) {
      const model::ParamEntry& e = layout.entries()[f.entry];
      ASSERT_GE(f.flat_offset, e.offset);
      ASSERT_LE(f.flat_offset + f.numel, e.offset + e.shape.numel());
      for (int64_t i = 0; i < f.numel; ++i) {
        ++owners[size_t(f.flat_offset + i)];
        ASSERT_LT(f.shard_offset + i, plan.shard_numel());
        ++used[size_t(f.shard_offset + i)];
      }
    }
    for (int u : used) EXPECT_LE(u, 1);
    for (const GradBucket& b : plan.buckets()) {
      EXPECT_EQ(b.padded_numel % num_shards, 0);
      EXPECT_EQ(b.chunk_start, b.start + rank * b.chunk_numel);
    }
  }
  EXPECT_LT(shard_numel * num_shards - layout.total_numel(), num_shards) << "padding only to divide";
  for (const model::ParamEntry& e : layout.entries())
    for (int64_t i = e.offset; i < e.offset + e.shape.numel(); ++i) EXPECT_EQ(owners[size_t(i)], 1) << "element " << i;
  EXPECT_EQ(owners[40], 0) << "alignment padding belongs to no fragment";
}

TEST(BucketPlan, UnshardedIsTheBufferItself) {
  const model::ParamLayout layout = small_layout();
  const BucketPlan plan(layout, kBoundaries, kOneBucket, 1, 0);
  EXPECT_EQ(ranges(plan), (std::vector<std::pair<int64_t, int64_t>>{{0, 192}}));
  EXPECT_EQ(plan.shard_numel(), layout.total_numel());
  ASSERT_EQ(plan.fragments().size(), layout.entries().size());
  for (size_t i = 0; i < plan.fragments().size(); ++i) {
    const ShardFragment& f = plan.fragments()[i];
    EXPECT_EQ(f.entry, i);
    EXPECT_EQ(f.flat_offset, layout.entries()[i].offset);
    EXPECT_EQ(f.shard_offset, f.flat_offset) << "optimizer state laid out like the ParamStore";
    EXPECT_EQ(f.numel, layout.entries()[i].shape.numel());
  }
}

TEST(BucketPlan, BucketsRunFromTheEndAndCloseAtABoundary) {
  const model::ParamLayout layout = small_layout();
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(ranges(BucketPlan(layout, kBoundaries, 1, 1, 0)), (Ranges{{160, 192}, {96, 160}, {64, 96}, {0, 64}}));
  // 32 elements above 160 are not 60 yet; above 96 they are. Then 32 above 64 are not; 0 closes the rest.
  EXPECT_EQ(ranges(BucketPlan(layout, kBoundaries, 60, 1, 0)), (Ranges{{96, 192}, {0, 96}}));
}

TEST(BucketPlan, ShardedBucketsDivide) {
  const model::ParamLayout layout = small_layout();
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  // 3 divides 192: boundaries 160 and 64 round up to 162 and 66.
  EXPECT_EQ(ranges(BucketPlan(layout, kBoundaries, 1, 3, 1)), (Ranges{{162, 192}, {96, 162}, {66, 96}, {0, 66}}));
  // 5 does not: the last 2 elements get a bucket of their own, padded to 5, one element per chunk.
  const BucketPlan five(layout, kBoundaries, kOneBucket, 5, 0);
  EXPECT_EQ(ranges(five), (Ranges{{190, 192}, {0, 190}}));
  EXPECT_EQ(five.buckets()[0].padded_numel, 5);
  EXPECT_EQ(BucketPlan(layout, kBoundaries, kOneBucket, 5, 1).buckets()[0].chunk_numel_in_buffer(), 1);
  EXPECT_EQ(BucketPlan(layout, kBoundaries, kOneBucket, 5, 2).buckets()[0].chunk_numel_in_buffer(), 0);
  for (int shards : {2, 3, 4, 5, 7})
    for (int64_t bucket_size : {int64_t(1), int64_t(60), kOneBucket})
      expect_shards_cover_the_parameters(layout, bucket_size, shards);
}

TEST(BucketPlan, ChecksItsArguments) {
  const model::ParamLayout layout = small_layout();
  EXPECT_THROW(BucketPlan(layout, kBoundaries, 1, 2, 2), Error);
  EXPECT_THROW(BucketPlan(layout, kBoundaries, 0, 1, 0), Error);
  EXPECT_THROW(BucketPlan(layout, {64, 96}, 1, 1, 0), Error);
  EXPECT_THROW(BucketPlan(layout, {0, 96, 64}, 1, 1, 0), Error);
}

}  // namespace
}  // namespace rf::optim
