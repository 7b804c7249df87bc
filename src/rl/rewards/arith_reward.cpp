#include "rl/rewards/arith_reward.h"

#include <nlohmann/json.hpp>

#include "data/builtin_tasks.h"

namespace rf::rl {

ArithScorer::ArithScorer() : task_(data::make_task(std::string(data::ArithTask::kName), nullptr, 0)) {}

RewardScore ArithScorer::score(std::string_view solution_str, const nlohmann::json& ground_truth,
                               const nlohmann::json& /*extra_info*/) const {
  const double acc = task_->score(std::string(solution_str), ground_truth_text(ground_truth, name())).acc;
  return {.score = acc, .extra = {{"acc", acc}}};
}

}  // namespace rf::rl
