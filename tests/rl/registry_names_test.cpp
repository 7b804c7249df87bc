// The name-keyed choices: every config string verl accepts selects its implementation, and an
// unknown one is a ConfigError under its config key that lists the known names.
#include <gtest/gtest.h>

#include <functional>

#include "rl/advantage_estimator.h"
#include "rl/agg_loss.h"
#include "rl/kl_controller.h"
#include "rl/kl_penalty.h"
#include "rl/policy_loss.h"

namespace rf::testing {
namespace {

// The ConfigError `lookup` throws, which must name `key` and contain each of `expected`.
void expect_config_error(const std::function<void()>& lookup, const std::string& key,
                         const std::vector<std::string>& expected) {
  try {
    lookup();
    ADD_FAILURE() << key << ": no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), key);
    for (const std::string& text : expected) EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(RegistryNames, EveryVerlNameSelectsItsImplementation) {
  for (const char* name : {"gae", "grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gpg",
                           "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax"})
    EXPECT_EQ(rl::find_advantage_estimator(name).name, name);
  for (const char* name : {"vanilla", "gspo", "gpg", "cispo", "sapo", "geo_mean", "kl_cov"})
    EXPECT_EQ(rl::find_policy_loss(name).name, name);
  for (const char* name : {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"})
    EXPECT_EQ(rl::agg_mode_name(rl::parse_agg_mode(name)), name);
  EXPECT_EQ(rl::parse_kl_penalty("kl"), rl::KlPenalty::k1);
  EXPECT_EQ(rl::parse_kl_penalty("mse"), rl::KlPenalty::k2);
  EXPECT_EQ(rl::parse_kl_penalty("low_var_kl"), rl::KlPenalty::k3);
  EXPECT_EQ(rl::kl_penalty_name(rl::KlPenalty::k3), "low_var_kl");
  EXPECT_EQ(rl::parse_kl_control_type("adaptive"), rl::KlControlType::adaptive);
}

TEST(RegistryNames, UnknownNamesListTheKnownOnes) {
  expect_config_error([] { rl::find_advantage_estimator("grpoo"); }, "adv_estimator",
                      {"'grpoo'", "did you mean 'grpo'", "gae", "remax"});
  expect_config_error([] { rl::find_policy_loss("clip_cov"); }, "policy_loss.loss_mode",
                      {"'clip_cov'", "vanilla", "kl_cov"});
  expect_config_error([] { rl::parse_agg_mode("token-sum"); }, "loss_agg_mode",
                      {"'token-sum'", "token-mean", "seq-mean-token-sum-norm"});
  expect_config_error([] { rl::parse_kl_penalty("full"); }, "kl_penalty", {"'full'", "low_var_kl", "k3"});
  expect_config_error([] { rl::parse_kl_penalty("k3+"); }, "kl_penalty", {"'k3+'", "straight-through"});
  expect_config_error([] { rl::parse_kl_control_type("pid"); }, "kl_ctrl.type", {"'pid'", "fixed", "adaptive"});
}

TEST(KlController, AdaptiveNeedsAPositiveHorizon) {
  expect_config_error(
      [] {
        rl::KlController({rl::KlControlType::adaptive, 0.1, 0, 6.0});
      },
      "horizon", {"must be positive"});
}

}  // namespace
}  // namespace rf::testing
