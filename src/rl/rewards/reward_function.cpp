#include "rl/rewards/reward_function.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace rf::rl {

int64_t count_failures(std::span<const RewardOutcome> outcomes) {
  return std::ranges::count_if(outcomes, [](const RewardOutcome& outcome) { return outcome.error.has_value(); });
}

const RewardScorer& RuleRewardFunction::scorer_for(const std::string& data_source, size_t sample) {
  if (const auto found = scorers_.find(data_source); found != scorers_.end()) return *found->second;
  try {
    return *scorers_.emplace(data_source, make_rule_scorer(data_source)).first->second;
  } catch (const ConfigError& e) {
    throw ConfigError(e.key_path(), fmt::format("{} (reward sample {})", e.detail(), sample));
  }
}

std::vector<RewardOutcome> RuleRewardFunction::score(std::span<const RewardRequest> requests) {
  std::vector<RewardOutcome> outcomes;
  outcomes.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const RewardRequest& request = requests[i];
    const RewardScorer& scorer = scorer_for(request.data_source, i);
    try {
      outcomes.push_back({.score = scorer.score(request.solution_str, request.ground_truth, request.extra_info)});
    } catch (const Error& e) {
      throw Error(fmt::format("{} (reward sample {}, data_source '{}')", e.what(), i, request.data_source));
    }
  }
  return outcomes;
}

}  // namespace rf::rl
