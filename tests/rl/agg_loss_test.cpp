// Loss aggregation: agg_loss against its loop twin and its gradient against finite differences, and
// the global form's invariance (docs/rl_algorithms.md): for every agg mode, the loss and its gradient
// with respect to the per-token losses are the same computed at once, over 4 micro-batches, and over
// 2 DP ranks x micro-batches (the DP reduction simulated as the sum the engine's reduction is).
// The losses built on aggregate() (policy, value, entropy) inherit it, which the last test checks.
//
// Dimension legend: B batch (responses), T response tokens, V vocab.
#include "rl/agg_loss.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/element_access.h"
#include "rl/logprob_entropy.h"
#include "rl/policy_loss.h"
#include "rl/value_loss.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

constexpr std::array<rl::AggMode, 4> kAggModes{rl::AggMode::token_mean, rl::AggMode::seq_mean_token_sum,
                                               rl::AggMode::seq_mean_token_mean, rl::AggMode::seq_mean_token_sum_norm};

// The step's counts as the engine gathers them: loss tokens, and sequences with at least one.
engine::LossContext step_context(const Tensor& mask_BT) {
  engine::LossContext context;
  for (int64_t b = 0; b < mask_BT.size(0); ++b) {
    int64_t tokens = 0;
    for (int64_t t = 0; t < mask_BT.size(1); ++t) tokens += mask_BT.at<float>({b, t}) != 0.0f;
    context.global_num_tokens += tokens;
    context.global_num_seqs += tokens > 0;
  }
  return context;
}

TEST(AggLoss, MatchesItsLoopTwin) {
  uint64_t seed = 100;
  for (rl::AggMode mode : kAggModes) {
    for (const auto& [B, T] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {8, 7}, {17, 11}}) {
      for (const rl::VerlBatchInfo& info : {rl::VerlBatchInfo{}, rl::VerlBatchInfo{4, 97.0, 24.0, 5.0},
                                            rl::VerlBatchInfo{2, 40.0, 12.0, std::nullopt}}) {
        const Tensor loss = random_tensor({B, T}, DType::f64, ++seed, -2.0, 3.0);
        const Tensor mask = random_response_mask(B, T, seed);
        const double expected = rl::agg_loss_loop(loss, mask, mode, info);
        EXPECT_NEAR(rl::agg_loss(loss, mask, mode, info), expected, 1e-12 * (1 + std::abs(expected)))
            << rl::agg_mode_name(mode) << " B=" << B << " T=" << T << " dp_size=" << info.dp_size;
      }
    }
  }
}

TEST(AggLoss, GradientMatchesFiniteDifferences) {
  const Tensor mask = random_response_mask(6, 5, 3);
  Tensor loss = random_tensor({6, 5}, DType::f64, 3, -1.0, 1.0);
  for (rl::AggMode mode : kAggModes) {
    for (const rl::LossAggregation& aggregation :
         {rl::LossAggregation::verl(mode), rl::LossAggregation::global(mode, {40, 9, 2, 3}, 16.0)}) {
      Tensor dloss({6, 5}, DType::f64);
      aggregation.aggregate(loss, mask, dloss);
      expect_gradient_matches_fd([&] { return aggregation.aggregate(loss, mask); }, loss, dloss,
                                 std::string(rl::agg_mode_name(mode)));
    }
  }
}

// Loss and gradient of the whole batch given as `splits`: per rank, the row counts of its
// micro-batches. Contributions are summed over micro-batches and then over ranks.
struct Split {
  double loss = 0;
  Tensor dloss_BT;
};

Split aggregate_split(const rl::LossAggregation& aggregation, const Tensor& loss_BT, const Tensor& mask_BT,
                      const std::vector<std::vector<int64_t>>& rows_per_rank) {
  Split split{0.0, Tensor(loss_BT.shape(), DType::f64)};
  int64_t row = 0;
  for (const std::vector<int64_t>& micro_batches : rows_per_rank) {
    double rank_loss = 0;
    for (int64_t rows : micro_batches) {
      rank_loss += aggregation.aggregate(loss_BT.view().slice(0, row, rows), mask_BT.view().slice(0, row, rows),
                                         split.dloss_BT.view().slice(0, row, rows));
      row += rows;
    }
    split.loss += rank_loss;  // the DP reduction: a sum over ranks
  }
  EXPECT_EQ(row, loss_BT.size(0)) << "the split does not cover the batch";
  return split;
}

TEST(AggLoss, GlobalFormIsInvariantToMicroBatchesAndDp) {
  const int64_t B = 12, T = 7;
  const Tensor mask = random_response_mask(B, T, 21);
  const Tensor loss = random_tensor({B, T}, DType::f64, 21, -1.0, 2.0);
  const engine::LossContext context = step_context(mask);
  ASSERT_GT(context.global_num_seqs, 0);
  for (rl::AggMode mode : kAggModes) {
    const std::string what(rl::agg_mode_name(mode));
    const auto aggregation = rl::LossAggregation::global(mode, context);
    const Split at_once = aggregate_split(aggregation, loss, mask, {{B}});
    const Split micro_batches = aggregate_split(aggregation, loss, mask, {{2, 5, 1, 4}});
    const Split dp_ranks = aggregate_split(aggregation, loss, mask, {{3, 4}, {1, 2, 2}});
    for (const Split* split : {&micro_batches, &dp_ranks}) {
      EXPECT_NEAR(split->loss, at_once.loss, 1e-12 * (1 + std::abs(at_once.loss))) << what;
      expect_close(split->dloss_BT, at_once.dloss_BT, 1e-12, 1e-15, what + " dloss");
    }
    // At once it is verl's value with local counts, except sum-norm (/ S, see agg_loss.h).
    const double verl = rl::agg_loss(loss, mask, mode);
    const double expected =
        mode == rl::AggMode::seq_mean_token_sum_norm ? verl / double(context.global_num_seqs) : verl;
    EXPECT_NEAR(at_once.loss, expected, 1e-12 * (1 + std::abs(expected))) << what;
  }
}

// Every loss built on aggregate() gives the same value at once and split, with global counts.
// kl_cov is left out on purpose: like verl, it picks its penalised tokens within each micro-batch.
TEST(AggLoss, LossesWithGlobalCountsAreInvariant) {
  const int64_t B = 10, T = 6, V = 5;
  const Tensor mask = random_response_mask(B, T, 31);
  const Tensor old_log_prob = random_tensor({B, T}, DType::f32, 31, -3.0, -0.1);
  const Tensor log_prob = random_tensor({B, T}, DType::f32, 32, -3.0, -0.1);
  const Tensor advantages = random_tensor({B, T}, DType::f32, 33, -1.0, 1.0);
  const Tensor weights = random_tensor({B, T}, DType::f32, 34, 0.5, 1.5);
  const Tensor logits = random_tensor({B, T, V}, DType::f32, 35, -2.0, 2.0);
  const engine::LossContext context = step_context(mask);
  const std::vector<std::vector<int64_t>> dp_split{{3, 2}, {1, 4}};

  auto split_sum = [&](const std::function<double(int64_t, int64_t)>& loss_of_rows) {
    double sum = 0;
    int64_t row = 0;
    for (const auto& micro_batches : dp_split)
      for (int64_t rows : micro_batches) {
        sum += loss_of_rows(row, rows);
        row += rows;
      }
    return sum;
  };
  auto rows = [](const Tensor& t, int64_t row, int64_t count) { return t.view().slice(0, row, count); };

  for (rl::AggMode mode : kAggModes) {
    const auto aggregation = rl::LossAggregation::global(mode, context, 8.0);
    for (const rl::PolicyLoss& loss : rl::policy_losses()) {
      if (loss.name == "kl_cov") continue;
      auto pg_loss = [&](int64_t row, int64_t count) {
        return loss
            .compute({rows(old_log_prob, row, count), rows(log_prob, row, count), rows(advantages, row, count),
                      rows(mask, row, count), rows(weights, row, count)},
                     {}, aggregation)
            .pg_loss;
      };
      const double at_once = pg_loss(0, B);
      EXPECT_NEAR(split_sum(pg_loss), at_once, 1e-9 * (1 + std::abs(at_once)))
          << loss.name << " " << rl::agg_mode_name(mode);
    }
    auto value_loss = [&](int64_t row, int64_t count) {
      return rl::compute_value_loss(rows(log_prob, row, count), rows(advantages, row, count),
                                    rows(old_log_prob, row, count), rows(mask, row, count), 0.2, aggregation)
          .vf_loss;
    };
    EXPECT_NEAR(split_sum(value_loss), value_loss(0, B), 1e-9 * (1 + std::abs(value_loss(0, B))))
        << "value loss " << rl::agg_mode_name(mode);
    auto entropy_loss = [&](int64_t row, int64_t count) {
      return rl::compute_entropy_loss(rows(logits, row, count), rows(mask, row, count), aggregation);
    };
    EXPECT_NEAR(split_sum(entropy_loss), entropy_loss(0, B), 1e-9 * (1 + std::abs(entropy_loss(0, B))))
        << "entropy loss " << rl::agg_mode_name(mode);
  }
}

}  // namespace
}  // namespace rf::testing
