// RuleRewardFunction: a batch scored through the rule scorers gives each sample what its data_source's
// scorer gives it alone, in request order; dataset errors name the sample.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "rl/rewards/reward_function.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::testing {
namespace {

std::vector<rl::RewardRequest> mixed_requests() {
  return {
      {"arith", "46", "46", nullptr},
      {"openai/gsm8k", "6 * 12 = 72\n#### 72", "72", nullptr},
      {"arith", " 47 ", "46", nullptr},
      {"openai/gsm8k", "6 * 12 = 72", "72", nullptr},
      {"openai/gsm8k", "#### 1,234", "1234", {{"split", "train"}}},
      {"arith", "12", 12, nullptr},  // a numeric ground truth, as JsonlDataset stores one
  };
}

TEST(RuleRewardFunction, ScoresEachSampleWithItsDataSourcesScorer) {
  const std::vector<rl::RewardRequest> requests = mixed_requests();
  rl::RuleRewardFunction function;
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests);
  ASSERT_EQ(outcomes.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const rl::RewardRequest& r = requests[i];
    const rl::RewardScore alone =
        rl::make_rule_scorer(r.data_source)->score(r.solution_str, r.ground_truth, r.extra_info);
    EXPECT_EQ(outcomes[i].score.score, alone.score) << i;
    EXPECT_EQ(outcomes[i].score.extra, alone.extra) << i;
    EXPECT_FALSE(outcomes[i].error) << i;
  }
  // Not all equal: the batch tells right from wrong answers.
  EXPECT_EQ(outcomes[0].score.score, 1.0);
  EXPECT_EQ(outcomes[2].score.score, 0.0);
  EXPECT_EQ(outcomes[0].score.extra.at("acc"), 1.0);  // arith's dict-style result keeps acc
  EXPECT_EQ(rl::count_failures(outcomes), 0);
  // A second batch reuses the scorers made for the first and scores the same.
  const std::vector<rl::RewardOutcome> again = function.score(requests);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(again[i].score.score, outcomes[i].score.score) << i;
}

TEST(RuleRewardFunction, DatasetErrorsNameTheSample) {
  std::vector<rl::RewardRequest> requests = mixed_requests();
  requests.push_back({"openai/gsm8k", "#### 3", nlohmann::json::array({3}), nullptr});  // sample 6
  rl::RuleRewardFunction function;
  try {
    function.score(requests);
    ADD_FAILURE() << "a list ground truth was scored";
  } catch (const ConfigError& e) {
    ADD_FAILURE() << e.what();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("reward sample 6"), std::string::npos) << message;
    EXPECT_NE(message.find("data_source 'openai/gsm8k'"), std::string::npos) << message;
    EXPECT_NE(message.find("ground_truth"), std::string::npos) << message;
  }
  requests.back() = {"math_dapo", "x", "1", nullptr};
  try {
    function.score(requests);
    ADD_FAILURE() << "an unknown data_source was scored";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "data_source");
    const std::string message = e.what();
    EXPECT_NE(message.find("'math_dapo'"), std::string::npos) << message;
    EXPECT_NE(message.find("reward sample 6"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace rf::testing
