#include "rl/rewards/gsm8k_reward.h"

#include <vector>

#include "rl/rewards/python_str.h"

namespace rf::rl {
namespace {

// verl matches on the last 300 characters only ("a safe approximation for 300 tokens").
constexpr size_t kSolutionClipChars = 300;

bool is_number_char(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

// End of the match of verl's number pattern `\-?[0-9\.\,]+` at `pos` (greedy), or `pos` for none.
size_t number_match_end(std::string_view s, size_t pos) {
  size_t end = pos < s.size() && s[pos] == '-' ? pos + 1 : pos;
  const size_t digits_begin = end;
  while (end < s.size() && is_number_char(s[end])) ++end;
  return end == digits_begin ? pos : end;
}

// re.findall("#### (\-?[0-9\.\,]+)", s): the captured groups, left to right.
std::vector<std::string_view> find_hash_answers(std::string_view s) {
  constexpr std::string_view kMarker = "#### ";
  std::vector<std::string_view> answers;
  for (size_t hit = s.find(kMarker); hit != std::string_view::npos;) {
    const size_t begin = hit + kMarker.size(), end = number_match_end(s, begin);
    if (end > begin) answers.push_back(s.substr(begin, end - begin));
    hit = s.find(kMarker, end > begin ? end : hit + 1);
  }
  return answers;
}

// re.findall("(\-?[0-9\.\,]+)", s).
std::vector<std::string_view> find_numbers(std::string_view s) {
  std::vector<std::string_view> numbers;
  for (size_t pos = 0; pos < s.size();) {
    const size_t end = number_match_end(s, pos);
    if (end > pos) numbers.push_back(s.substr(pos, end - pos));
    pos = end > pos ? end : pos + 1;
  }
  return numbers;
}

}  // namespace

std::optional<std::string> gsm8k_extract_solution(std::string_view solution_str, Gsm8kMethod method) {
  const std::string text = to_valid_utf8(solution_str);
  const std::string_view tail = last_code_points(text, kSolutionClipChars);
  if (method == Gsm8kMethod::strict) {
    const std::vector<std::string_view> answers = find_hash_answers(tail);
    if (answers.empty()) return std::nullopt;
    // `$` cannot be inside the match; verl removes it anyway, and so do we.
    return python_replace(python_replace(answers.back(), ",", ""), "$", "");
  }
  const std::vector<std::string_view> numbers = find_numbers(tail);
  if (numbers.empty()) return std::nullopt;
  // The last number that is not "" or "."; when there is none, verl's loop variable is left at the
  // first number, and that is the answer.
  for (size_t i = numbers.size(); i-- > 1;)
    if (numbers[i] != ".") return std::string(numbers[i]);
  return std::string(numbers[0]);
}

double gsm8k_compute_score(std::string_view solution_str, std::string_view ground_truth, const Gsm8kParams& params) {
  const std::optional<std::string> answer = gsm8k_extract_solution(solution_str, params.method);
  if (!answer) return 0.0;
  return *answer == ground_truth ? params.score : params.format_score;
}

RewardScore Gsm8kScorer::score(std::string_view solution_str, const nlohmann::json& ground_truth,
                               const nlohmann::json& /*extra_info*/) const {
  return {.score = gsm8k_compute_score(solution_str, ground_truth_text(ground_truth, name()), params_)};
}

}  // namespace rf::rl
