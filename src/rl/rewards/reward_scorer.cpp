#include "rl/rewards/reward_scorer.h"

#include <array>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "rl/named_choice.h"
#include "rl/rewards/arith_reward.h"
#include "rl/rewards/countdown_reward.h"
#include "rl/rewards/gsm8k_reward.h"
#include "rl/rewards/math_reward.h"

namespace rf::rl {
namespace {

enum class Match { exact, substring };

struct RuleScorerEntry {
  std::string_view name;  // a data_source value
  Match match;
  std::unique_ptr<RewardScorer> (*make)();
};

template <class Scorer>
std::unique_ptr<RewardScorer> make_scorer() {
  return std::make_unique<Scorer>();
}

// verl's default_compute_score branches, in its order, then TinyZero's countdown branch (`"countdown"
// in data_source`) and rlforge's own task.
constexpr std::array<RuleScorerEntry, 6> kRuleScorers{{
    {"openai/gsm8k", Match::exact, make_scorer<Gsm8kScorer>},
    {"lighteval/MATH", Match::exact, make_scorer<MathScorer>},
    {"DigitalLearningGmbH/MATH-lighteval", Match::exact, make_scorer<MathScorer>},
    {"HuggingFaceH4/MATH-500", Match::exact, make_scorer<MathScorer>},
    {"countdown", Match::substring, make_scorer<CountdownScorer>},
    {"arith", Match::exact, make_scorer<ArithScorer>},
}};

bool matches(const RuleScorerEntry& entry, std::string_view data_source) {
  return entry.match == Match::exact ? data_source == entry.name
                                     : data_source.find(entry.name) != std::string_view::npos;
}

}  // namespace

std::unique_ptr<RewardScorer> make_rule_scorer(std::string_view data_source) {
  for (const RuleScorerEntry& entry : kRuleScorers)
    if (matches(entry, data_source)) return entry.make();
  throw_unknown_name("data_source", data_source, rule_scorer_data_sources());
}

std::vector<std::string> rule_scorer_data_sources() {
  std::vector<std::string> names;
  for (const RuleScorerEntry& entry : kRuleScorers) names.emplace_back(entry.name);
  return names;
}

std::string ground_truth_text(const nlohmann::json& ground_truth, std::string_view scorer) {
  if (ground_truth.is_string()) return ground_truth.get<std::string>();
  RF_CHECK(ground_truth.is_number(), "{}: reward_model.ground_truth must be a string or a number, got {} {}", scorer,
           ground_truth.type_name(), ground_truth.dump());
  return ground_truth.dump();
}

}  // namespace rf::rl
