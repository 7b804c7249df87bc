// Countdown's rule reward, a port of TinyZero's verl/utils/reward_score/countdown.py (the same code
// as verl's unmerged commit 12a8987d): the response must write an equation in <answer>...</answer>
// that uses each of the given numbers exactly once and evaluates to the target.
//   no equation found                              -> 0
//   numbers not used exactly once, not evaluable,
//   or the wrong value                             -> format_score (0.1)
//   |value - target| < 1e-5                        -> score (1.0)
// The equation is taken from the last <answer> of the last line after the first "Assistant:" (or
// "<|im_start|>assistant"): TinyZero scores the decoded prompt + response, whose chat template puts
// that marker before the response. A bare response without the marker scores 0, in TinyZero too.
// The equation is evaluated by python_arithmetic.h, not by an interpreter.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rl/rewards/python_arithmetic.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::rl {

struct CountdownParams {
  double format_score = 0.1;
  double score = 1.0;
};

// TinyZero's extract_solution: the stripped text of the last <answer>...</answer>, or nullopt.
std::optional<std::string> countdown_extract_solution(std::string_view solution_str);
// TinyZero's validate_equation: the digit runs of `equation`, as integers, are `numbers` as a multiset.
bool countdown_validate_equation(std::string_view equation, std::span<const int64_t> numbers);
// TinyZero's compute_score. `target` is an int or a float, as in the dataset.
double countdown_compute_score(std::string_view solution_str, PyNumber target, std::span<const int64_t> numbers,
                               const CountdownParams& params);

// ground_truth is {"target": number, "numbers": [integers]}; another shape is an rf::Error.
class CountdownScorer final : public RewardScorer {
 public:
  explicit CountdownScorer(CountdownParams params = {}) : params_(params) {}
  std::string_view name() const override { return "countdown"; }
  RewardScore score(std::string_view solution_str, const nlohmann::json& ground_truth,
                    const nlohmann::json& extra_info) const override;

 private:
  CountdownParams params_;
};

}  // namespace rf::rl
