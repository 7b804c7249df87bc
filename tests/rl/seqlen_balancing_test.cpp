// Karmarkar-Karp partitioning: every index exactly once and no part empty; on every small input its
// largest part is within LDM's proven ratio (4/3 - 1/(3k)) of the optimum found by brute force; on
// inputs built against the greedy rule verl keeps beside it (each item, in input order, to the lightest
// part), it balances at least as well. Then verl's _balance_batch order.
//
// Dimension legend: B batch (samples).
#include "rl/seqlen_balancing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

using Partition = std::vector<std::vector<int64_t>>;

int64_t part_sum(const std::vector<int64_t>& part, std::span<const int64_t> values) {
  int64_t sum = 0;
  for (int64_t i : part) sum += values[size_t(i)];
  return sum;
}
int64_t largest_part(const Partition& parts, std::span<const int64_t> values) {
  int64_t out = 0;
  for (const auto& part : parts) out = std::max(out, part_sum(part, values));
  return out;
}
int64_t spread(const Partition& parts, std::span<const int64_t> values) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  for (const auto& part : parts) {
    lo = std::min(lo, part_sum(part, values));
    hi = std::max(hi, part_sum(part, values));
  }
  return hi - lo;
}

void expect_partition_of(const Partition& parts, int64_t n, int64_t k, const std::string& what) {
  ASSERT_EQ(int64_t(parts.size()), k) << what;
  std::vector<int64_t> all;
  for (const auto& part : parts) {
    EXPECT_FALSE(part.empty()) << what;
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end())) << what;
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(static_cast<size_t>(n));
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected) << what << ": every index exactly once";
}

// The smallest possible largest part, over all k^n assignments.
int64_t optimal_largest_part(std::span<const int64_t> values, int64_t k) {
  const auto n = int64_t(values.size());
  int64_t num_assignments = 1;
  for (int64_t i = 0; i < n; ++i) num_assignments *= k;
  int64_t best = std::numeric_limits<int64_t>::max();
  for (int64_t code = 0; code < num_assignments; ++code) {
    std::vector<int64_t> sums(static_cast<size_t>(k), 0);
    for (int64_t i = 0, c = code; i < n; ++i, c /= k) sums[size_t(c % k)] += values[size_t(i)];
    best = std::min(best, *std::max_element(sums.begin(), sums.end()));
  }
  return best;
}

// verl's greedy_partition (equal sizes by its bias: every item first counts as heavier than all others
// together, so each part takes B/k of them).
Partition greedy_partition(std::span<const int64_t> values, int64_t k, rl::PartSizes sizes) {
  const int64_t bias = sizes == rl::PartSizes::equal ? std::accumulate(values.begin(), values.end(), int64_t(1)) : 0;
  Partition parts(static_cast<size_t>(k));
  std::vector<int64_t> sums(static_cast<size_t>(k), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto lightest = size_t(std::min_element(sums.begin(), sums.end()) - sums.begin());
    parts[lightest].push_back(int64_t(i));
    sums[lightest] += values[i] + bias;
  }
  return parts;
}

TEST(SeqlenBalancing, WithinLdmRatioOfTheOptimumOnSmallInputs) {
  Draws draws(11);
  for (int64_t k : {2, 3, 4}) {
    for (int64_t n = k; n <= (k == 4 ? 7 : 8); ++n) {
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<int64_t> values;
        for (int64_t i = 0; i < n; ++i) values.push_back(trial % 3 == 0 ? 1 + draws.below(5) : 1 + draws.below(1000));
        const std::string what = "k=" + std::to_string(k) + " values=" + ::testing::PrintToString(values);
        const Partition parts = rl::balanced_partitions(values, k, rl::PartSizes::any);
        expect_partition_of(parts, n, k, what);
        const double bound = (4.0 / 3.0 - 1.0 / (3.0 * double(k))) * double(optimal_largest_part(values, k));
        EXPECT_LE(double(largest_part(parts, values)), bound + 1e-9) << what;
      }
    }
  }
}

TEST(SeqlenBalancing, EqualSizesGiveEqualCounts) {
  Draws draws(5);
  for (int64_t k : {1, 2, 3, 4}) {
    for (int64_t per_part : {1, 2, 5}) {
      std::vector<int64_t> values;
      for (int64_t i = 0; i < k * per_part; ++i) values.push_back(draws.below(3000));
      const Partition parts = rl::balanced_partitions(values, k, rl::PartSizes::equal);
      expect_partition_of(parts, k * per_part, k, "equal k=" + std::to_string(k));
      for (const auto& part : parts) EXPECT_EQ(int64_t(part.size()), per_part);
    }
  }
}

TEST(SeqlenBalancing, AtLeastAsBalancedAsGreedyOnInputsBuiltAgainstIt) {
  std::vector<std::vector<int64_t>> inputs;
  std::vector<int64_t> ascending(24), ones_then_big(17, 1), geometric, doubled;
  std::iota(ascending.begin(), ascending.end(), 1);
  ones_then_big.push_back(40);  // greedy spreads the small ones evenly, then the big one lands on top
  for (int64_t v = 1; v <= 4096; v *= 2) geometric.push_back(v);
  for (int64_t v : {3, 3, 2, 2, 2, 8, 8, 9, 9, 10, 10, 11, 11, 30, 31}) doubled.push_back(v);
  for (auto& input : {ascending, ones_then_big, geometric, doubled}) inputs.push_back(input);
  Draws draws(3);
  for (int trial = 0; trial < 20; ++trial) {  // sorted ascending: greedy places the heaviest last
    std::vector<int64_t> values;
    for (int i = 0; i < 32; ++i) values.push_back(1 + draws.below(4096));
    std::sort(values.begin(), values.end());
    inputs.push_back(values);
  }
  for (const std::vector<int64_t>& values : inputs) {
    for (int64_t k : {2, 3, 4}) {
      for (rl::PartSizes sizes : {rl::PartSizes::any, rl::PartSizes::equal}) {
        if (sizes == rl::PartSizes::equal && int64_t(values.size()) % k != 0) continue;
        const std::string what = "k=" + std::to_string(k) + " values=" + ::testing::PrintToString(values);
        const Partition kk = rl::balanced_partitions(values, k, sizes);
        expect_partition_of(kk, int64_t(values.size()), k, what);
        EXPECT_LE(spread(kk, values), spread(greedy_partition(values, k, sizes), values)) << what;
      }
    }
  }
}

TEST(SeqlenBalancing, ArgumentsAreChecked) {
  const std::vector<int64_t> values{5, 3, 2};
  expect_error_containing([&] { (void)rl::balanced_partitions(values, 4, rl::PartSizes::any); },
                          "num_parts: expected between 1 and the 3 items, got 4");
  expect_error_containing([&] { (void)rl::balanced_partitions(values, 2, rl::PartSizes::equal); },
                          "num_parts: 2 equal parts need a multiple of 2 items, got 3");
}

TEST(BalanceBatchOrder, ChunksCarryBalancedWorkloadsWithLightSamplesAtTheEnds) {
  // Sorted ascending: cut into contiguous chunks as is, the last DP rank would get all the long ones.
  std::vector<int64_t> seqlens;
  Draws draws(9);
  for (int i = 0; i < 48; ++i) seqlens.push_back(16 + draws.below(2000));
  std::sort(seqlens.begin(), seqlens.end());
  std::vector<int64_t> workloads;
  for (int64_t length : seqlens) workloads.push_back(rl::sequence_workload(length));
  EXPECT_EQ(rl::sequence_workload(100), 24576 * 100 + 100 * 100);

  for (int64_t dp : {1, 2, 4, 8}) {
    const std::vector<int64_t> order = rl::balance_batch_order(seqlens, dp);
    std::vector<int64_t> sorted_order = order;
    std::sort(sorted_order.begin(), sorted_order.end());
    std::vector<int64_t> identity(seqlens.size());
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_EQ(sorted_order, identity) << "a permutation";

    const int64_t n = int64_t(seqlens.size()) / dp;
    Partition balanced, contiguous;
    for (int64_t r = 0; r < dp; ++r) {
      balanced.emplace_back(order.begin() + r * n, order.begin() + (r + 1) * n);
      contiguous.emplace_back(identity.begin() + r * n, identity.begin() + (r + 1) * n);
      // Within a chunk: workloads rise to a peak, then fall (evens ascending, then odds descending).
      const auto& chunk = balanced.back();
      const auto peak = std::max_element(chunk.begin(), chunk.end(), [&](int64_t a, int64_t b) {
        return workloads[size_t(a)] < workloads[size_t(b)];
      });
      for (auto it = chunk.begin(); it + 1 < chunk.end(); ++it) {
        if (it + 1 <= peak) {
          EXPECT_LE(workloads[size_t(*it)], workloads[size_t(*(it + 1))]) << "dp=" << dp;
        }
        if (it >= peak) {
          EXPECT_GE(workloads[size_t(*it)], workloads[size_t(*(it + 1))]) << "dp=" << dp;
        }
      }
    }
    // The chunks are KK's equal-size parts, so as balanced as balanced_partitions makes them.
    Partition kk = rl::balanced_partitions(workloads, dp, rl::PartSizes::equal);
    EXPECT_EQ(spread(balanced, workloads), spread(kk, workloads)) << "dp=" << dp;
    if (dp > 1) {
      EXPECT_LT(spread(balanced, workloads) * 10, spread(contiguous, workloads)) << "dp=" << dp;
    }
  }
}

}  // namespace
}  // namespace rf::testing
