// Dynamic micro-batches under mpirun: DP ranks with very different samples (so their own counts
// differ) end with the same number of micro-batches, the smallest count at which every rank's balanced
// split fits the budget (computed here on one rank from every rank's samples), each within budget and
// holding each of its samples once. The TP ranks of a replica, which hold the same samples, get the same
// micro-batches. A rank that cannot reach the group's count makes every rank fail, none hang.
//
// Dimension legend: B batch (samples), M micro-batches.
#include "rl/dynamic_micro_batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "dist/parallel_context.h"
#include "mpi_test_world.h"
#include "rl/seqlen_balancing.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

using dist::testing::world;
using Partition = std::vector<std::vector<int64_t>>;

// DP rank r's samples: rank 0 long ones, the others shorter and fewer tokens.
std::vector<int64_t> samples_of_dp_rank(int r) {
  Draws draws(100 + uint64_t(r));
  std::vector<int64_t> seqlens;
  for (int i = 0; i < 24; ++i) seqlens.push_back(r == 0 ? 500 + draws.below(1500) : 10 + draws.below(400 + 100 * r));
  return seqlens;
}

bool fits(const std::vector<int64_t>& seqlens, int64_t count, int64_t budget) {
  if (count > int64_t(seqlens.size())) return false;
  std::vector<int64_t> workloads;
  for (int64_t length : seqlens) workloads.push_back(rl::sequence_workload(length));
  for (const auto& part : rl::balanced_partitions(workloads, count, rl::PartSizes::any)) {
    int64_t tokens = 0;
    for (int64_t i : part) tokens += seqlens[size_t(i)];
    if (tokens > budget) return false;
  }
  return true;
}

// The count the group must agree on: the smallest at least every rank's ceil(tokens / budget) at which
// every rank's split fits.
int64_t expected_count(int dp_size, int64_t budget) {
  int64_t count = 1;
  for (int r = 0; r < dp_size; ++r) {
    const std::vector<int64_t> seqlens = samples_of_dp_rank(r);
    const int64_t total = std::accumulate(seqlens.begin(), seqlens.end(), int64_t(0));
    count = std::max(count, (total + budget - 1) / budget);
  }
  const auto all_fit = [&](int64_t c) {
    for (int r = 0; r < dp_size; ++r)
      if (!fits(samples_of_dp_rank(r), c, budget)) return false;
    return true;
  };
  while (!all_fit(count)) ++count;
  return count;
}

TEST(DynamicMicroBatchesMpi, EveryDpRankRunsTheSameCount) {
  const int W = world().size();
  for (int tp : {1, 2}) {
    if (W % tp != 0) continue;
    const dist::ParallelContext ctx = dist::ParallelContext::create(
        dist::RankLayout({.world_size = W, .tensor_model_parallel_size = tp}), world(), false);
    for (int64_t budget : {2000, 4096, 9000}) {
      SCOPED_TRACE("tp=" + std::to_string(tp) + " budget=" + std::to_string(budget));
      const std::vector<int64_t> seqlens = samples_of_dp_rank(ctx.dp().rank());
      const Partition micro = rl::make_dynamic_micro_batches(seqlens, budget, ctx.dp());
      EXPECT_EQ(int64_t(micro.size()), expected_count(ctx.dp().size(), budget));

      Tensor count(Shape{1}, DType::i64), counts(Shape{W}, DType::i64);
      count.at<int64_t>({0}) = int64_t(micro.size());
      world().all_gather(count, counts);
      for (int r = 0; r < W; ++r) EXPECT_EQ(counts.at<int64_t>({r}), int64_t(micro.size())) << "rank " << r;

      std::vector<int64_t> seen;
      for (const auto& part : micro) {
        int64_t tokens = 0;
        for (int64_t i : part) tokens += seqlens[size_t(i)];
        EXPECT_LE(tokens, budget);
        EXPECT_FALSE(part.empty());
        seen.insert(seen.end(), part.begin(), part.end());
      }
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(seqlens.size());
      std::iota(all.begin(), all.end(), 0);
      EXPECT_EQ(seen, all);

      // TP neighbours: the same micro-batches (compared through the first sample of each).
      Tensor firsts(Shape{int64_t(micro.size())}, DType::i64), gathered(Shape{tp, int64_t(micro.size())}, DType::i64);
      for (size_t m = 0; m < micro.size(); ++m) firsts.at<int64_t>({int64_t(m)}) = micro[m].front();
      ctx.tp().all_gather(firsts, gathered);
      for (int r = 0; r < tp; ++r)
        for (size_t m = 0; m < micro.size(); ++m)
          EXPECT_EQ(gathered.at<int64_t>({r, int64_t(m)}), micro[m].front()) << "tp rank " << r;
    }
  }
}

TEST(DynamicMicroBatchesMpi, ARankThatCannotFollowFailsEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  // Rank 0 has one short sample; the others need at least three micro-batches.
  const std::vector<int64_t> seqlens =
      world().rank() == 0 ? std::vector<int64_t>{5} : std::vector<int64_t>{90, 90, 90, 90};
  expect_error_containing([&] { (void)rl::make_dynamic_micro_batches(seqlens, 100, world()); },
                          "cannot cut its samples into");
}

}  // namespace
}  // namespace rf::testing
