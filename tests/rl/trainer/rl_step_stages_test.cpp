// The trainer's driver-side stages against hand-computed values: the adv stage (score at the last
// response token, KL in the reward with the controller's coefficient, GRPO over the uid groups, GAE over
// the critic's values), the rollout-vs-trainer log-prob metrics and the critic's data metrics.
#include <gtest/gtest.h>

#include <cmath>

#include "rl/trainer/rl_advantages.h"
#include "rl/trainer/rl_metrics.h"

namespace rf::rl {
namespace {

RlResponse response(int64_t group, size_t length, double score) {
  RlResponse r;
  r.group = group;
  r.prompt = {1};
  r.response.assign(length, 5);
  r.score = score;
  r.old_log_probs.assign(length, -1.0f);
  r.ref_log_prob.assign(length, -1.5f);
  return r;
}

TEST(RlAdvantages, GrpoNormalisesEachGroupAndBroadcastsOverTheResponse) {
  // Two prompts x 3 responses: scores {1, 0, 0} and {1, 1, 1}.
  RlBatch batch = {response(0, 2, 1), response(0, 3, 0), response(0, 1, 0),
                   response(1, 2, 1), response(1, 2, 1), response(1, 2, 1)};
  AlgorithmConfig algorithm;
  algorithm.adv_estimator = "grpo";
  rl::KlController kl(rl::KlControlConfig{});
  const Metrics m = compute_advantages(batch, algorithm, kl);
  EXPECT_TRUE(m.empty());  // no KL in the reward
  // Group 0: mean 1/3, unbiased std sqrt(1/3); epsilon 1e-6 added to the std.
  const double std0 = std::sqrt(1.0 / 3.0);
  EXPECT_NEAR(batch[0].advantages[0], (1 - 1.0 / 3) / (std0 + 1e-6), 1e-6);
  EXPECT_NEAR(batch[0].advantages[1], (1 - 1.0 / 3) / (std0 + 1e-6), 1e-6);
  for (float a : batch[1].advantages) EXPECT_NEAR(a, (0 - 1.0 / 3) / (std0 + 1e-6), 1e-6);
  EXPECT_EQ(batch[1].advantages.size(), 3u);
  // Group 1: all equal, advantage 0.
  for (size_t b = 3; b < 6; ++b)
    for (float a : batch[b].advantages) EXPECT_EQ(a, 0.0f);
  // The score sits at the last response token.
  EXPECT_EQ(batch[1].token_level_rewards, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(batch[0].token_level_rewards, (std::vector<float>{0, 1}));
}

TEST(RlAdvantages, RemaxSubtractsThePromptsGreedyScoreFromTheReturns) {
  // Prompt 0's greedy response scored 0.25, prompt 1's 1: each response's baseline (gen_max).
  RlBatch batch = {response(0, 2, 1), response(0, 1, 0), response(1, 3, 0)};
  batch[0].reward_baseline = batch[1].reward_baseline = 0.25;
  batch[2].reward_baseline = 1;
  AlgorithmConfig algorithm;
  algorithm.adv_estimator = "remax";
  rl::KlController kl(rl::KlControlConfig{});
  compute_advantages(batch, algorithm, kl);
  // returns = reverse cumsum of the token rewards (the score at the last token); A = returns - baseline.
  EXPECT_EQ(batch[0].returns, (std::vector<float>{1, 1}));
  EXPECT_EQ(batch[0].advantages, (std::vector<float>{0.75f, 0.75f}));
  EXPECT_EQ(batch[1].advantages, (std::vector<float>{-0.25f}));
  EXPECT_EQ(batch[2].returns, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(batch[2].advantages, (std::vector<float>{-1, -1, -1}));
}

TEST(RlAdvantages, KlInRewardSubtractsBetaTimesTheKlAtEveryToken) {
  RlBatch batch = {response(0, 2, 1), response(0, 1, 0)};
  batch[1].old_log_probs = {-2.0f};
  AlgorithmConfig algorithm;
  algorithm.adv_estimator = "grpo";
  algorithm.use_kl_in_reward = true;
  algorithm.kl_penalty = rl::KlPenalty::k1;  // old - ref
  rl::KlControlConfig kl_config;
  kl_config.kl_coef = 0.1;
  rl::KlController kl(kl_config);
  const Metrics m = compute_advantages(batch, algorithm, kl);
  // Response 0: kl 0.5 per token; response 1: kl -0.5.
  EXPECT_NEAR(batch[0].token_level_rewards[0], -0.05, 1e-7);
  EXPECT_NEAR(batch[0].token_level_rewards[1], 1 - 0.05, 1e-7);
  EXPECT_NEAR(batch[1].token_level_rewards[0], 0.05, 1e-7);
  EXPECT_NEAR(m.at("actor/reward_kl_penalty"), 0.0, 1e-7);  // mean of per-response means 0.5 and -0.5
  EXPECT_EQ(m.at("actor/reward_kl_penalty_coeff"), 0.1);
}

TEST(RlAdvantages, GaeBootstrapsFromTheCriticsValues) {
  // lam 0: token t's return is r_t + gamma * V_{t+1} (0 past the response's end, the padding included).
  RlBatch batch = {response(0, 2, 1), response(1, 1, 0)};
  batch[0].values = {0.25f, 0.5f};
  batch[1].values = {0.75f};
  AlgorithmConfig algorithm;  // adv_estimator gae, verl's default
  algorithm.gamma = 0.5;
  algorithm.lam = 0;
  rl::KlController kl(rl::KlControlConfig{});
  compute_advantages(batch, algorithm, kl);
  EXPECT_NEAR(batch[0].returns[0], 0 + 0.5 * 0.5, 1e-7);
  EXPECT_NEAR(batch[0].returns[1], 1, 1e-7);
  EXPECT_NEAR(batch[1].returns[0], 0, 1e-7);
  // The advantages (returns - values: 0, 0.5, -0.75) whitened over the three tokens keep their order.
  EXPECT_LT(batch[1].advantages[0], batch[0].advantages[0]);
  EXPECT_LT(batch[0].advantages[0], batch[0].advantages[1]);
}

TEST(RlMetrics, RolloutDiffComparesProbabilitiesAndLogProbs) {
  RlBatch batch = {response(0, 2, 1), response(0, 1, 0)};
  batch[0].rollout_log_probs = {-1.0f, -1.25f};
  batch[1].rollout_log_probs = {-1.0f};
  const Metrics m = rollout_diff_metrics(batch);
  const double d = std::abs(std::exp(-1.25) - std::exp(-1.0));
  EXPECT_NEAR(m.at("training/rollout_probs_diff_max"), d, 1e-7);
  EXPECT_NEAR(m.at("training/rollout_probs_diff_mean"), d / 3, 1e-7);
  EXPECT_NEAR(m.at("training/rollout_probs_diff_std"), std::sqrt((2 * (d / 3) * (d / 3) + (2 * d / 3) * (2 * d / 3)) / 2), 1e-7);
  EXPECT_NEAR(m.at("rollout/logprob_diff_max"), 0.25, 1e-7);
}

TEST(RlMetrics, DataMetricsUseVerlsNames) {
  RlBatch batch = {response(0, 2, 1), response(0, 4, 0)};
  for (RlResponse& r : batch) {
    r.token_level_rewards.assign(r.response.size(), 0.0f);
    r.advantages.assign(r.response.size(), 0.5f);
    r.returns.assign(r.response.size(), 0.25f);
  }
  const Metrics m = data_metrics(batch, 1, 4);
  EXPECT_EQ(m.at("critic/score/mean"), 0.5);
  EXPECT_EQ(m.at("critic/score/max"), 1.0);
  EXPECT_EQ(m.at("response_length/mean"), 3.0);
  EXPECT_EQ(m.at("response_length/clip_ratio"), 0.5);
  EXPECT_EQ(m.at("prompt_length/clip_ratio"), 1.0);
  EXPECT_EQ(m.at("critic/advantages/min"), 0.5);
  EXPECT_FALSE(m.contains("critic/values/mean"));  // no critic
  EXPECT_FALSE(m.contains("critic/vf_explained_var"));
}

TEST(RlMetrics, CriticValuesAndTheirExplainedVariance) {
  RlBatch batch = {response(0, 2, 1), response(1, 1, 0)};
  batch[0].returns = {1.0f, 1.0f};
  batch[1].returns = {0.0f};
  batch[0].values = {1.0f, 0.5f};
  batch[1].values = {0.0f};
  const Metrics m = data_metrics(batch, 16, 8);
  EXPECT_EQ(m.at("critic/values/mean"), 0.5);
  EXPECT_EQ(m.at("critic/values/max"), 1.0);
  EXPECT_EQ(m.at("critic/values/min"), 0.0);
  // G - V = {0, 0.5, 0}: unbiased variance 1/12; var(G) = 1/3.
  EXPECT_NEAR(m.at("critic/vf_explained_var"), 1 - (1.0 / 12) / (1.0 / 3 + 1e-5), 1e-7);
}

}  // namespace
}  // namespace rf::rl
