// The reward of rlforge's built-in `arith` task ("12+34=" -> "46"): the task's own scorer
// (data::ArithTask::score: the response equals the ground truth once surrounding white space is
// trimmed from both), so training and evaluation can never disagree on what is correct. It
// returns {score = acc, extra: {"acc": acc}} like verl's dict-returning scorers; there is no format
// score, so a wrong or malformed answer scores 0.
#pragma once

#include <memory>

#include "data/task.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::rl {

class ArithScorer final : public RewardScorer {
 public:
  ArithScorer();
  std::string_view name() const override { return "arith"; }
  RewardScore score(std::string_view solution_str, const nlohmann::json& ground_truth,
                    const nlohmann::json& extra_info) const override;

 private:
  std::unique_ptr<const data::Task> task_;  // scoring does not depend on the task's kwargs or seed
};

}  // namespace rf::rl
