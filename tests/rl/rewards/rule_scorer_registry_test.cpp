// make_rule_scorer picks the scorer verl's default_compute_score (and TinyZero's, for countdown)
// picks for a data_source; an unknown data_source is a ConfigError listing the known ones. Also the
// arith scorer, which is the arith task's own scorer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/builtin_tasks.h"
#include "rl/rewards/arith_reward.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::testing {
namespace {

TEST(RuleScorerRegistry, DataSourcesSelectVerlsScorers) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"openai/gsm8k", "gsm8k"},
      {"lighteval/MATH", "math"},
      {"DigitalLearningGmbH/MATH-lighteval", "math"},
      {"HuggingFaceH4/MATH-500", "math"},
      {"countdown", "countdown"},
      {"countdown_3to4", "countdown"},  // TinyZero and verl test `"countdown" in data_source`
      {"arith", "arith"},
  };
  for (const auto& [data_source, scorer] : expected) EXPECT_EQ(rl::make_rule_scorer(data_source)->name(), scorer);
  EXPECT_EQ(rl::rule_scorer_data_sources(),
            (std::vector<std::string>{"openai/gsm8k", "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval",
                                      "HuggingFaceH4/MATH-500", "countdown", "arith"}));
}

TEST(RuleScorerRegistry, UnknownDataSourceIsAConfigErrorListingTheKnownOnes) {
  // `math` and `aime24` are verl's math_dapo scorer, which is not ported: they must not fall through
  // to another scorer. Exact names are case-sensitive, as in verl.
  for (const char* data_source : {"openai/gsm8K", "gsm8k", "math", "aime24", "", "Countdown"}) {
    try {
      rl::make_rule_scorer(data_source);
      ADD_FAILURE() << "'" << data_source << "': no error";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), "data_source");
      const std::string message = e.what();
      EXPECT_NE(message.find("'" + std::string(data_source) + "'"), std::string::npos) << message;
      for (const std::string& known : rl::rule_scorer_data_sources())
        EXPECT_NE(message.find(known), std::string::npos) << message;
    }
  }
  try {
    rl::make_rule_scorer("openai/gsm8K");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'openai/gsm8k'"), std::string::npos) << e.what();
  }
}

TEST(RuleScorerRegistry, RowsScoreThroughTheRegistry) {
  // One row per scorer, as a dataset row carries them: (data_source, response, ground_truth).
  struct Row {
    std::string data_source, response;
    nlohmann::json ground_truth;
    double score;
  };
  const Row rows[] = {
      {"openai/gsm8k", "6 * 12 = 72\n#### 72", "72", 1.0},
      {"openai/gsm8k", "6 * 12 = 72", "72", 0.0},
      {"lighteval/MATH", "so $\\boxed{\\dfrac{1}{2}}$", "\\frac12", 1.0},
      {"HuggingFaceH4/MATH-500", "so $\\boxed{3}$", "4", 0.0},
      {"countdown", "Assistant: <answer>(2 + 3) * 4</answer>", {{"target", 20}, {"numbers", {2, 3, 4}}}, 1.0},
      {"countdown", "Assistant: <answer>2 + 3 * 4</answer>", {{"target", 20}, {"numbers", {2, 3, 4}}}, 0.1},
      {"arith", "46", "46", 1.0},
      {"arith", "47", "46", 0.0},
  };
  for (const Row& row : rows)
    EXPECT_EQ(rl::make_rule_scorer(row.data_source)->score(row.response, row.ground_truth, nullptr).score, row.score)
        << row.data_source << ": " << row.response;
}

TEST(RuleScorerRegistry, ScorersAreSafeToShareAcrossThreads) {
  const auto scorer = rl::make_rule_scorer("openai/gsm8k");
  const auto math = rl::make_rule_scorer("lighteval/MATH");
  std::vector<std::thread> threads;
  std::vector<double> totals(4, 0.0);
  for (size_t t = 0; t < totals.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i)
        totals[t] += scorer->score("#### " + std::to_string(i % 10), "3", nullptr).score +
                     math->score("\\boxed{" + std::to_string(i % 4) + "}", "1", nullptr).score;
    });
  for (std::thread& thread : threads) thread.join();
  for (double total : totals) EXPECT_EQ(total, 100.0 + 250.0);
}

TEST(ArithReward, IsTheArithTasksOwnScore) {
  const rl::ArithScorer scorer;
  const auto task = data::make_task("arith", nullptr, 0);
  struct Case {
    std::string response;
    double acc;
  };
  const Case cases[] = {
      {"46", 1.0}, {" 46\n", 1.0}, {"\t46 ", 1.0},              // surrounding white space is trimmed
      {"47", 0.0}, {"046", 0.0},   {"46abc", 0.0}, {"4 6", 0.0},  // anything else is wrong
      {"", 0.0},   {"abc", 0.0},   {"+46", 0.0},
  };
  for (const Case& c : cases) {
    const rl::RewardScore score = scorer.score(c.response, "46", nullptr);
    EXPECT_EQ(score.score, c.acc) << c.response;
    EXPECT_EQ(score.extra, (std::map<std::string, double>{{"acc", c.acc}})) << c.response;
    EXPECT_EQ(task->score(c.response, "46").acc, c.acc) << c.response;
  }
  EXPECT_EQ(scorer.score("46", 46, nullptr).score, 1.0);  // a numeric ground truth reads as its text
  EXPECT_THROW(scorer.score("46", nlohmann::json::object(), nullptr), Error);
}

}  // namespace
}  // namespace rf::testing
