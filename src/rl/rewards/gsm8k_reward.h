// GSM8K's rule reward, a port of verl/utils/reward_score/gsm8k.py (verl main, Jan 2026): the answer is
// read from the last 300 characters of the response only, either after the last `#### ` (strict, the
// GSM8K answer format; commas and `$` removed) or as the last number-like run (flexible, which keeps
// commas and a trailing `.`: "72." does not equal "72"). The answer is compared with the ground truth
// as a string: equal -> `score`, different -> `format_score`, no answer -> 0.
// Not here: any numeric equivalence ("72.0" vs "72"), as in verl.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rl/rewards/reward_scorer.h"

namespace rf::rl {

enum class Gsm8kMethod { strict, flexible };

struct Gsm8kParams {
  Gsm8kMethod method = Gsm8kMethod::strict;  // verl's default_compute_score uses the defaults
  double format_score = 0.0;
  double score = 1.0;
};

// verl's extract_solution: nullopt when no answer is found.
std::optional<std::string> gsm8k_extract_solution(std::string_view solution_str, Gsm8kMethod method);
// verl's compute_score.
double gsm8k_compute_score(std::string_view solution_str, std::string_view ground_truth, const Gsm8kParams& params);

class Gsm8kScorer final : public RewardScorer {
 public:
  explicit Gsm8kScorer(Gsm8kParams params = {}) : params_(params) {}
  std::string_view name() const override { return "gsm8k"; }
  RewardScore score(std::string_view solution_str, const nlohmann::json& ground_truth,
                    const nlohmann::json& extra_info) const override;

 private:
  Gsm8kParams params_;
};

}  // namespace rf::rl
