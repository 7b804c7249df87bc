// Dynamic micro-batches on one rank (the DP group of one): every micro-batch within the token budget,
// every sample exactly once, the count the plain loop over candidate counts finds, never fewer than the
// fewest bins any packing could use (brute force on small inputs), heaviest micro-batches in the middle;
// and restoring the sample order after running them. The cross-rank agreement on the count is
// tested under mpirun (dynamic_micro_batches_mpi_test.cpp).
//
// Dimension legend: B batch (samples), M micro-batches.
#include "rl/dynamic_micro_batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "dist/process_group.h"
#include "rl/seqlen_balancing.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

using Partition = std::vector<std::vector<int64_t>>;

int64_t tokens_of(const std::vector<int64_t>& part, const std::vector<int64_t>& seqlens) {
  int64_t sum = 0;
  for (int64_t i : part) sum += seqlens[size_t(i)];
  return sum;
}

// The loop twin of the count: the first M from ceil(tokens / budget) whose balanced split fits.
int64_t loop_count(const std::vector<int64_t>& seqlens, int64_t budget) {
  std::vector<int64_t> workloads;
  for (int64_t length : seqlens) workloads.push_back(rl::sequence_workload(length));
  const int64_t total = std::accumulate(seqlens.begin(), seqlens.end(), int64_t(0));
  for (int64_t m = std::max<int64_t>(1, (total + budget - 1) / budget);; ++m) {
    bool fits = true;
    for (const auto& part : rl::balanced_partitions(workloads, m, rl::PartSizes::any))
      fits = fits && tokens_of(part, seqlens) <= budget;
    if (fits) return m;
  }
}

// The fewest bins of capacity `budget` that hold every sample (exhaustive search over assignments).
int64_t fewest_bins(const std::vector<int64_t>& seqlens, int64_t budget) {
  const auto n = int64_t(seqlens.size());
  for (int64_t bins = 1; bins <= n; ++bins) {
    int64_t num_assignments = 1;
    for (int64_t i = 0; i < n; ++i) num_assignments *= bins;
    for (int64_t code = 0; code < num_assignments; ++code) {
      std::vector<int64_t> load(static_cast<size_t>(bins), 0);
      for (int64_t i = 0, c = code; i < n; ++i, c /= bins) load[size_t(c % bins)] += seqlens[size_t(i)];
      if (*std::max_element(load.begin(), load.end()) <= budget) return bins;
    }
  }
  return n;
}

void expect_valid_micro_batches(const Partition& micro, const std::vector<int64_t>& seqlens, int64_t budget,
                                const std::string& what) {
  std::vector<int64_t> seen;
  for (const auto& part : micro) {
    EXPECT_FALSE(part.empty()) << what;
    EXPECT_LE(tokens_of(part, seqlens), budget) << what;
    seen.insert(seen.end(), part.begin(), part.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(seqlens.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all) << what << ": every sample exactly once";
}

TEST(DynamicMicroBatches, BudgetsHoldAndTheCountIsTheLoopsOnSmallInputs) {
  dist::SingleProcessGroup dp("dp");
  Draws draws(21);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + draws.below(7);
    std::vector<int64_t> seqlens;
    for (int64_t i = 0; i < n; ++i) seqlens.push_back(1 + draws.below(20));
    const int64_t longest = *std::max_element(seqlens.begin(), seqlens.end());
    const int64_t budget = longest + draws.below(25);
    const std::string what = "budget=" + std::to_string(budget) + " seqlens=" + ::testing::PrintToString(seqlens);
    const Partition micro = rl::make_dynamic_micro_batches(seqlens, budget, dp);
    expect_valid_micro_batches(micro, seqlens, budget, what);
    EXPECT_EQ(int64_t(micro.size()), loop_count(seqlens, budget)) << what;
    EXPECT_GE(int64_t(micro.size()), fewest_bins(seqlens, budget)) << what;
  }
}

TEST(DynamicMicroBatches, KeepsTheBudgetWhereVerlsFirstCountWouldNot) {
  // Three samples of 6 under a budget of 9: ceil(18 / 9) = 2 micro-batches cannot hold them.
  dist::SingleProcessGroup dp("dp");
  const std::vector<int64_t> seqlens{6, 6, 6};
  const Partition micro = rl::make_dynamic_micro_batches(seqlens, 9, dp);
  EXPECT_EQ(micro.size(), 3u);
  expect_valid_micro_batches(micro, seqlens, 9, "3 x 6 within 9");
}

TEST(DynamicMicroBatches, LargeBatchesStayWithinBudgetWithHeaviestInTheMiddle) {
  dist::SingleProcessGroup dp("dp");
  Draws draws(4);
  std::vector<int64_t> seqlens;
  for (int i = 0; i < 256; ++i) seqlens.push_back(32 + draws.below(4000));
  const int64_t total = std::accumulate(seqlens.begin(), seqlens.end(), int64_t(0));
  const Partition micro = rl::make_dynamic_micro_batches(seqlens, 16384, dp);
  expect_valid_micro_batches(micro, seqlens, 16384, "256 samples");
  EXPECT_GE(int64_t(micro.size()), (total + 16383) / 16384);
  EXPECT_LE(int64_t(micro.size()), (total + 16383) / 16384 + 2);  // balanced parts fill the budget closely
  // Workloads rise to the middle and fall after it.
  std::vector<int64_t> load;
  for (const auto& part : micro) {
    int64_t w = 0;
    for (int64_t i : part) w += rl::sequence_workload(seqlens[size_t(i)]);
    load.push_back(w);
  }
  const auto peak = std::max_element(load.begin(), load.end()) - load.begin();
  for (int64_t m = 0; m + 1 < int64_t(load.size()); ++m) {
    if (m + 1 <= peak) {
      EXPECT_LE(load[size_t(m)], load[size_t(m + 1)]) << "m=" << m;
    }
    if (m >= peak) {
      EXPECT_GE(load[size_t(m)], load[size_t(m + 1)]) << "m=" << m;
    }
  }
}

TEST(DynamicMicroBatches, EmptyBatchAndBadBudgets) {
  dist::SingleProcessGroup dp("dp");
  EXPECT_TRUE(rl::make_dynamic_micro_batches(std::vector<int64_t>{}, 10, dp).empty());
  expect_error_containing([&] { (void)rl::make_dynamic_micro_batches(std::vector<int64_t>{4, 12}, 10, dp); },
                          "max_token_len: 10 is less than the longest sample's 12 tokens");
  expect_error_containing([&] { (void)rl::make_dynamic_micro_batches(std::vector<int64_t>{4, -1}, 10, dp); },
                          "seqlens_B: expected token counts >= 0, got -1");
}

}  // namespace
}  // namespace rf::testing
