// The policy losses' and KL estimators' gradients with respect to the current log-probs: against finite
// differences for every mode x every aggregation (random f64 inputs drawn away from the kinks), exactly 0
// where a clamp, clip or max/min selects a constant, torch's tie rule, and exactly 0 off the mask.
// tests/rl/torch_grad_reference_test.cpp compares the same gradients with torch autograd.
//
// Dimension legend: B batch (responses), T response tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "actor_loss_test_data.h"
#include "rl/kl_penalty.h"
#include "rl/policy_loss.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

constexpr rl::AggMode kAggModes[] = {rl::AggMode::token_mean, rl::AggMode::seq_mean_token_sum,
                                     rl::AggMode::seq_mean_token_mean, rl::AggMode::seq_mean_token_sum_norm};

TEST(PolicyLossGrad, MatchesFiniteDifferencesForEveryModeAndAggregation) {
  uint64_t seed = 500;
  for (const rl::PolicyLoss& loss : rl::policy_losses()) {
    for (rl::AggMode agg_mode : kAggModes) {
      for (bool with_weights : {false, true}) {
        rl::PolicyLossConfig config = fd_policy_config();
        const FdMode fd = fd_mode(loss.name, config);
        const ResponseRows rows = random_response_rows({5, 7, ++seed, fd.kinks, fd.row_kinks, with_weights});
        if (loss.name == "kl_cov") config.kl_cov_ratio = stable_kl_cov_ratio(rows);
        engine::LossContext context;
        context.global_num_tokens = num_loss_tokens(rows.mask) + 4;
        context.global_num_seqs = 7;
        for (const rl::LossAggregation& aggregation :
             {rl::LossAggregation::global(agg_mode, context, 7.0), rl::LossAggregation::verl(agg_mode, {2})}) {
          const std::string what =
              fmt::format("{} {} weights={}", loss.name, rl::agg_mode_name(agg_mode), with_weights);
          const Tensor log_prob_at = clone(rows.log_prob, DType::f64), old_at = clone(rows.old_log_prob, DType::f64);
          const Tensor old_log_prob = clone(rows.old_log_prob, DType::f64);
          const Tensor grad({5, 7}, DType::f64);
          const rl::PolicyLossResult with_grad =
              loss.compute({old_log_prob, rows.log_prob, rows.advantages, rows.mask, rows.rollout_is_weights}, config,
                           aggregation, grad);
          auto pg_loss = [&] {
            if (fd.direction == FdDirection::log_prob_and_old)
              for (int64_t i = 0; i < old_log_prob.numel(); ++i)
                old_log_prob.data<double>()[i] =
                    old_at.data<double>()[i] + (rows.log_prob.data<double>()[i] - log_prob_at.data<double>()[i]);
            return loss
                .compute({old_log_prob, rows.log_prob, rows.advantages, rows.mask, rows.rollout_is_weights}, config,
                         aggregation)
                .pg_loss;
          };
          EXPECT_EQ(pg_loss(), with_grad.pg_loss) << what << ": asking for the gradient changed the loss";
          expect_gradient_matches_fd(pg_loss, rows.log_prob, grad, what);
        }
      }
    }
  }
}

// One (1, K) row of tokens given by their log-ratio δ and advantage; the gradient under token-mean over
// one loss token, so that it is dloss/dlog_prob itself (gspo, sapo: seq-mean-token-mean, divided by K).
struct TokenRow {
  std::vector<double> delta, advantages;
};
std::vector<double> token_gradient(std::string_view mode, const TokenRow& row, const rl::PolicyLossConfig& config) {
  const int64_t K = int64_t(row.delta.size());
  Tensor old_log_prob({1, K}, DType::f64), log_prob({1, K}, DType::f64), advantages({1, K}, DType::f64),
      mask({1, K}, DType::f32), grad({1, K}, DType::f64);
  for (int64_t t = 0; t < K; ++t) {
    log_prob.data<double>()[t] = -0.5 + std::min(row.delta[size_t(t)], 0.0);
    old_log_prob.data<double>()[t] = log_prob.data<double>()[t] - row.delta[size_t(t)];
    advantages.data<double>()[t] = row.advantages[size_t(t)];
    mask.data<float>()[t] = 1.0f;
  }
  engine::LossContext context;
  context.global_num_tokens = 1;
  context.global_num_seqs = 1;
  rl::find_policy_loss(mode).compute({old_log_prob, log_prob, advantages, mask, {}}, config,
                                     rl::LossAggregation::global(rl::AggMode::token_mean, context), grad);
  return {grad.data<double>(), grad.data<double>() + K};
}

// The log-ratio the losses form for token_gradient's row (log_prob - old_log_prob, as they compute it).
double formed_delta(double delta) {
  const double log_prob = -0.5 + std::min(delta, 0.0);
  return log_prob - (log_prob - delta);
}

TEST(PolicyLossGrad, VanillaIsZeroWhereAClampOrClipHoldsItsInput) {
  rl::PolicyLossConfig config;  // clip 0.2 / 0.2, dual clip 3
  const std::vector<double> g = token_gradient(
      "vanilla",
      {{25.0, -25.0, -20.0, 0.5, -0.5, -0.5, 1.5, 0.0, 0.1}, {1.0, 1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 0.0, -1.0}}, config);
  EXPECT_EQ(g[0], 0.0) << "δ beyond +20";
  EXPECT_EQ(g[1], 0.0) << "δ beyond -20, unclipped branch: the ±20 clamp holds it";
  EXPECT_EQ(g[2], -std::exp(formed_delta(-20.0))) << "δ at -20: the clamp passes its bound";
  EXPECT_EQ(g[3], 0.0) << "A > 0, ratio above 1 + high: clipped";
  EXPECT_EQ(g[4], 0.0) << "A < 0, ratio below 1 - low: clipped";
  EXPECT_EQ(g[5], -std::exp(formed_delta(-0.5))) << "A > 0, ratio below 1 - low: the unclipped branch wins";
  EXPECT_EQ(g[6], 0.0) << "A < 0, ratio above clip_ratio_c: the dual clip's constant";
  EXPECT_EQ(g[7], 0.0) << "A = 0";
  EXPECT_EQ(g[8], std::exp(formed_delta(0.1))) << "A < 0 inside the clip range";
}

TEST(PolicyLossGrad, VanillaDualClipTieSplitsTheGradientAsTorchMinDoes) {
  rl::PolicyLossConfig config;
  config.clip_ratio_c = std::exp(formed_delta(1.2));  // the ratio of a token with δ = 1.2, exactly
  const std::vector<double> g = token_gradient("vanilla", {{1.2}, {-1.0}}, config);
  EXPECT_EQ(g[0], 0.5 * config.clip_ratio_c);
}

TEST(PolicyLossGrad, SapoCispoGspoGeoMeanKlCovAtTheirBounds) {
  rl::PolicyLossConfig config;
  config.clip_ratio_high = 0.28;
  {
    const std::vector<double> g = token_gradient("sapo", {{-25.0, -20.0, 25.0}, {1.0, 1.0, -1.0}}, config);
    const double ratio = std::exp(formed_delta(-20.0)), sigmoid = 1.0 / (1.0 + std::exp(-(ratio - 1.0)));
    EXPECT_EQ(g[0], 0.0) << "sapo: δ beyond -20";
    const double expected = -4.0 * sigmoid * (1.0 - sigmoid) * ratio / (3.0 + 1e-8);  // seq-mean-token-mean
    EXPECT_NEAR(g[1], expected, 1e-12 * ratio) << "sapo: δ at -20 passes";
    EXPECT_NE(g[1], 0.0);
    EXPECT_EQ(g[2], 0.0) << "sapo: δ beyond +20";
  }
  {
    // cispo's gradient is -clamp(ρ)·A whatever the clip does: the clipped ratio is held, not zeroed.
    const std::vector<double> g = token_gradient("cispo", {{25.0, -25.0, 0.1}, {1.0, -1.0, 2.0}}, config);
    EXPECT_EQ(g[0], -(1.0 + 0.28));
    EXPECT_EQ(g[1], 1.0 - 0.2);
    EXPECT_EQ(g[2], -2.0 * std::exp(formed_delta(0.1)));
  }
  {
    // gspo: a sequence log-ratio of exactly 10 passes the cap, above it nothing does; A > 0 above the clip.
    const double weight = 1.0 / (6.0 + 1e-8);
    const std::vector<double> at_cap = token_gradient("gspo", {std::vector(6, 10.0), std::vector(6, -1.0)}, config);
    for (double g : at_cap) EXPECT_DOUBLE_EQ(g, std::exp(10.0) * weight);
    for (double g : token_gradient("gspo", {std::vector(6, 10.5), std::vector(6, -1.0)}, config)) EXPECT_EQ(g, 0.0);
    for (double g : token_gradient("gspo", {std::vector(6, 0.5), std::vector(6, 1.0)}, config)) EXPECT_EQ(g, 0.0);
  }
  {
    // geo_mean clips one side per advantage sign: A > 0 above high and A < 0 below -low give 0.
    const std::vector<double> g =
        token_gradient("geo_mean", {{0.5, -0.5, -0.5, 0.5, 0.0}, {2.0, 1.0, -1.0, -0.5, 0.0}}, config);
    EXPECT_EQ(g[0], 0.0);
    EXPECT_NE(g[1], 0.0);
    EXPECT_EQ(g[2], 0.0);
    EXPECT_NE(g[3], 0.0);
    EXPECT_EQ(g[4], 0.0) << "A = 0: sign(A) = 0";
  }
  {
    // kl_cov: two tokens have equal covariance, so the first is penalised; at δ = 0 |δ| adds no gradient.
    rl::PolicyLossConfig kl_cov = config;
    kl_cov.kl_cov_ratio = 0.5;
    const std::vector<double> g = token_gradient("kl_cov", {{0.0, 0.3}, {0.7, -0.4}}, kl_cov);
    EXPECT_EQ(g[0], -0.7);
    EXPECT_EQ(g[1], 0.4 * std::exp(formed_delta(0.3)));
  }
}

TEST(PolicyLossGrad, IsExactlyZeroOffTheMaskWhateverTheInputsThere) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const rl::PolicyLoss& loss : rl::policy_losses()) {
    const ResponseRows rows = random_response_rows({4, 6, 77, {}, {}, true});
    for (int64_t i = 0; i < rows.mask.numel(); ++i) {
      if (rows.mask.data<float>()[i] != 0.0f) continue;
      for (const Tensor* t : {&rows.old_log_prob, &rows.log_prob, &rows.advantages, &rows.rollout_is_weights})
        t->data<double>()[i] = nan;
    }
    engine::LossContext context;
    context.global_num_tokens = 20;
    context.global_num_seqs = 4;
    const Tensor grad({4, 6}, DType::f64);
    const double pg_loss =
        loss.compute({rows.old_log_prob, rows.log_prob, rows.advantages, rows.mask, rows.rollout_is_weights}, {},
                     rl::LossAggregation::global(rl::AggMode::seq_mean_token_mean, context), grad)
            .pg_loss;
    EXPECT_TRUE(std::isfinite(pg_loss)) << loss.name;
    for (int64_t i = 0; i < grad.numel(); ++i) {
      if (rows.mask.data<float>()[i] == 0.0f)
        EXPECT_EQ(grad.data<double>()[i], 0.0) << loss.name << " element " << i;
      else
        EXPECT_TRUE(std::isfinite(grad.data<double>()[i])) << loss.name << " element " << i;
    }
  }
}

// kl = kl_penalty(log_prob, ref); the gradient of Σ kl is dkl.
TEST(KlPenaltyGrad, MatchesFiniteDifferencesForEveryEstimator) {
  // ref - log_prob away from the kinks (|d| at 0, k3's outer clamp near 2.53 and -11.0).
  const std::vector<double> diffs{-9.0, -2.5, -1.0, -0.3, 0.3, 1.0, 2.0};
  const int64_t K = int64_t(diffs.size());
  for (rl::KlPenalty penalty : {rl::KlPenalty::k1, rl::KlPenalty::abs, rl::KlPenalty::k2, rl::KlPenalty::k3}) {
    Tensor log_prob({1, K}, DType::f64), ref({1, K}, DType::f64), kl({1, K}, DType::f64), dkl({1, K}, DType::f64);
    for (int64_t t = 0; t < K; ++t) {
      ref.data<double>()[t] = -0.5 - 0.3 * double(t);
      log_prob.data<double>()[t] = ref.data<double>()[t] - diffs[size_t(t)];
    }
    rl::kl_penalty(log_prob, ref, penalty, kl, dkl);
    auto kl_sum = [&] {
      rl::kl_penalty(log_prob, ref, penalty, kl);
      double sum = 0;
      for (int64_t t = 0; t < K; ++t) sum += kl.data<double>()[t];
      return sum;
    };
    expect_gradient_matches_fd(kl_sum, log_prob, dkl, std::string(rl::kl_penalty_name(penalty)));
  }
}

TEST(KlPenaltyGrad, ZeroWhereTorchGivesZero) {
  // ref - log_prob: 0 (abs's kink), 3 and -15 (k3 above its outer clamp of 10), 25 (inner clamp too).
  const std::vector<double> diffs{0.0, 3.0, -15.0, 25.0, -25.0};
  Tensor log_prob({1, 5}, DType::f64), ref({1, 5}, DType::f64), kl({1, 5}, DType::f64), dkl({1, 5}, DType::f64);
  for (int64_t t = 0; t < 5; ++t) {
    ref.data<double>()[t] = -1.0;
    log_prob.data<double>()[t] = -1.0 - diffs[size_t(t)];
  }
  rl::kl_penalty(log_prob, ref, rl::KlPenalty::abs, kl, dkl);
  EXPECT_EQ(dkl.data<double>()[0], 0.0);
  rl::kl_penalty(log_prob, ref, rl::KlPenalty::k3, kl, dkl);
  EXPECT_EQ(dkl.data<double>()[0], 0.0) << "k3 at d = 0: -(e^0 - 1)";
  for (int64_t t = 1; t < 5; ++t) {
    EXPECT_EQ(kl.data<double>()[t], 10.0) << t;
    EXPECT_EQ(dkl.data<double>()[t], 0.0) << t;
  }
}

}  // namespace
}  // namespace rf::testing
