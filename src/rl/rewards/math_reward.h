// MATH's rule reward, a port of verl/utils/reward_score/math_reward.py (itself lm-evaluation-harness's
// hendrycks_math utils): the answer is the content of the last `\boxed{...}` (balanced braces) or of
// `\boxed <text>` up to the next `$`; it scores 1.0 when it equals the ground truth after Hendrycks'
// strip_string normalisation, else 0.0. verl's quirks are kept, since they decide rewards:
//   - a last box written `\fbox{...}` is found but then fails remove_boxed's assertion: 0.0;
//   - when strip_string raises (two `\text{ }` units, a `\sqrt` or `\frac` with nothing after it),
//     the raw strings are compared instead.
// Not here: math_dapo (verl's `math`, `math_dapo`, `aime*` sources) and math_verify.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rl/rewards/reward_scorer.h"

namespace rf::rl {

// verl's last_boxed_only_string: "\boxed{...}" / "\fbox{...}" / "\boxed <text>", or nullopt.
std::optional<std::string> last_boxed_only_string(std::string_view text);
// verl's remove_boxed; nullopt where verl's assertion fails.
std::optional<std::string> remove_boxed(std::string_view boxed);
// Hendrycks' strip_string; nullopt where Python raises.
std::optional<std::string> math_strip_string(std::string_view answer);
// verl's is_equiv: normalised strings equal, or raw strings equal when normalising raises.
bool math_is_equiv(std::string_view answer, std::string_view ground_truth);
// verl's compute_score: 1.0 or 0.0.
double math_compute_score(std::string_view solution_str, std::string_view ground_truth);

class MathScorer final : public RewardScorer {
 public:
  std::string_view name() const override { return "math"; }
  RewardScore score(std::string_view solution_str, const nlohmann::json& ground_truth,
                    const nlohmann::json& extra_info) const override;
};

}  // namespace rf::rl
