// The batch interface the RL trainer scores a step's responses through, once per step: verl's reward
// manager loop (verl/workers/reward_manager/naive.py) with the call to `compute_score` behind it.
// Two implementations: RuleRewardFunction (the built-in rule scorers of reward_scorer.h, chosen per
// sample by data_source, as verl's default_compute_score) and PythonRewardFunction
// (python_reward_pool.h: a user's verl-style reward file, `custom_reward_function.path`).
// Not here: decoding the responses, where the score lands in the token-level reward (the trainer), and
// verl's `extra_info` additions (num_turns, rollout_reward_scores), which the caller puts in the request.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rl/rewards/reward_scorer.h"

namespace rf::rl {

// One sample, as verl's reward manager passes it to compute_score.
struct RewardRequest {
  std::string data_source;   // the row's data.reward_fn_key column
  std::string solution_str;  // the decoded response
  nlohmann::json ground_truth;
  nlohmann::json extra_info;  // null when the row has none
};

struct RewardOutcome {
  RewardScore score;
  // Set when the sample could not be scored and got the failure policy's fallback (score 0, no
  // extras): why, in one line.
  std::optional<std::string> error;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  // One outcome per request, in request order.
  virtual std::vector<RewardOutcome> score(std::span<const RewardRequest> requests) = 0;
};

// How many outcomes carry an error (scored by the fallback), for the step's metrics.
int64_t count_failures(std::span<const RewardOutcome> outcomes);

// The rule scorers keyed by data_source, one scorer per data_source made on first use. They never fall
// back: an unknown data_source is make_rule_scorer's ConfigError and a ground truth of the wrong shape
// its rf::Error (a dataset bug), both rethrown with the sample's index.
class RuleRewardFunction final : public RewardFunction {
 public:
  std::vector<RewardOutcome> score(std::span<const RewardRequest> requests) override;

 private:
  const RewardScorer& scorer_for(const std::string& data_source, size_t sample);

  std::map<std::string, std::unique_ptr<RewardScorer>, std::less<>> scorers_;
};

}  // namespace rf::rl
