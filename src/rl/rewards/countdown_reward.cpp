#include "rl/rewards/countdown_reward.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "rl/rewards/python_str.h"

namespace rf::rl {
namespace {

// Python's abs(result - target) < 1e-5, with int - int exact.
bool hits_target(const PyNumber& result, const PyNumber& target) {
  if (result.kind == PyNumber::Kind::integer && target.kind == PyNumber::Kind::integer)
    return result.integer == target.integer;
  return std::abs(result.as_double() - target.as_double()) < 1e-5;
}

// The text after the first `marker`, or nullopt.
std::optional<std::string_view> after_first(std::string_view s, std::string_view marker) {
  const size_t hit = s.find(marker);
  if (hit == std::string_view::npos) return std::nullopt;
  return s.substr(hit + marker.size());
}

// The group of the last match of re.finditer(r"<answer>(.*?)</answer>", line) (a line holds no '\n').
std::optional<std::string_view> last_answer_tag(std::string_view line) {
  constexpr std::string_view kOpen = "<answer>", kClose = "</answer>";
  std::optional<std::string_view> last;
  for (size_t open = line.find(kOpen); open != std::string_view::npos;) {
    const size_t close = line.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) break;
    last = line.substr(open + kOpen.size(), close - open - kOpen.size());
    open = line.find(kOpen, close + kClose.size());
  }
  return last;
}

}  // namespace

std::optional<std::string> countdown_extract_solution(std::string_view solution_str) {
  const std::string text = to_valid_utf8(solution_str);
  std::optional<std::string_view> response = after_first(text, "Assistant:");
  if (!response) response = after_first(text, "<|im_start|>assistant");
  if (!response) return std::nullopt;
  const std::string_view last_line = response->substr(response->rfind('\n') + 1);  // npos + 1 == 0
  const std::optional<std::string_view> answer = last_answer_tag(last_line);
  if (!answer) return std::nullopt;
  return std::string(python_strip(*answer));
}

bool countdown_validate_equation(std::string_view equation, std::span<const int64_t> numbers) {
  // re.findall(r"\d+") then int(): compared as canonical decimal text, so a digit run of any length
  // is read exactly. (Python's \d also matches non-ASCII digits; an equation with those fails to
  // evaluate, so its score is format_score either way.)
  std::vector<std::string> used, given;
  for (size_t pos = 0; pos < equation.size();) {
    if (equation[pos] < '0' || equation[pos] > '9') {
      ++pos;
      continue;
    }
    const size_t end = std::min(equation.find_first_not_of("0123456789", pos), equation.size());
    const size_t first_nonzero = std::min(equation.find_first_not_of('0', pos), end - 1);
    used.emplace_back(equation.substr(first_nonzero, end - first_nonzero));
    pos = end;
  }
  for (int64_t n : numbers) given.push_back(std::to_string(n));
  std::sort(used.begin(), used.end());
  std::sort(given.begin(), given.end());
  return used == given;
}

double countdown_compute_score(std::string_view solution_str, PyNumber target, std::span<const int64_t> numbers,
                               const CountdownParams& params) {
  const std::optional<std::string> equation = countdown_extract_solution(solution_str);
  if (!equation) return 0.0;
  if (!countdown_validate_equation(*equation, numbers)) return params.format_score;
  // TinyZero first requires ^[\d+\-*/().\s]+$ and then evals; the evaluator rejects every other
  // character itself, and both failures give format_score.
  const std::optional<PyNumber> result = eval_python_arithmetic(*equation);
  return result && hits_target(*result, target) ? params.score : params.format_score;
}

RewardScore CountdownScorer::score(std::string_view solution_str, const nlohmann::json& ground_truth,
                                   const nlohmann::json& /*extra_info*/) const {
  const auto shape_error = [&] {
    return fmt::format("countdown: reward_model.ground_truth must be {{\"target\": number, \"numbers\": [integers]}}, "
                       "got {}",
                       ground_truth.dump());
  };
  RF_CHECK(ground_truth.is_object() && ground_truth.contains("target") && ground_truth.contains("numbers"), "{}",
           shape_error());
  const nlohmann::json& target_json = ground_truth.at("target");
  const nlohmann::json& numbers_json = ground_truth.at("numbers");
  RF_CHECK(target_json.is_number() && numbers_json.is_array() &&
               std::all_of(numbers_json.begin(), numbers_json.end(),
                           [](const nlohmann::json& n) { return n.is_number_integer(); }),
           "{}", shape_error());
  const PyNumber target = target_json.is_number_integer() ? PyNumber::of_int(target_json.get<int64_t>())
                                                          : PyNumber::of_real(target_json.get<double>());
  const std::vector<int64_t> numbers = numbers_json.get<std::vector<int64_t>>();
  return {.score = countdown_compute_score(solution_str, target, numbers, params_)};
}

}  // namespace rf::rl
