#include "rl/rewards/math_reward.h"

#include <vector>

#include "rl/rewards/python_str.h"

namespace rf::rl {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Python's s[0] and s[1:] for a non-empty s.
std::string_view first_char(std::string_view s) { return s.substr(0, code_point_length(s, 0)); }
std::string_view after_first_char(std::string_view s) { return s.substr(code_point_length(s, 0)); }

// Whether `s` is what str(int(s)) prints: -?(0|[1-9][0-9]*), not "-0", and within CPython's
// 4300-digit limit on int(str) (past it int() raises, and fix_a_slash_b leaves the string alone).
bool is_canonical_int(std::string_view s) {
  constexpr size_t kMaxStrDigits = 4300;
  const std::string_view digits = s.starts_with('-') ? s.substr(1) : s;
  if (digits.empty() || digits.size() > kMaxStrDigits) return false;
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
  if (digits[0] == '0') return digits.size() == 1 && digits.size() == s.size();
  return true;
}

// The helpers below return nullopt where verl's Python raises inside strip_string.

// "\frac1b" and "\frac12" -> "\frac{1}{b}" and "\frac{1}{2}", even "\frac1{72}" (but not "\frac{72}1").
std::optional<std::string> fix_fracs(const std::string& string) {
  const std::vector<std::string_view> substrs = python_split(string, "\\frac");
  std::string new_str(substrs[0]);
  for (size_t i = 1; i < substrs.size(); ++i) {
    const std::string_view substr = substrs[i];
    new_str += "\\frac";
    if (substr.empty()) return std::nullopt;  // substr[0]: IndexError
    if (substr[0] == '{') {
      new_str += substr;
      continue;
    }
    if (num_code_points(substr) < 2) return string;  // verl returns its input unchanged here
    const std::string_view a = first_char(substr), rest = after_first_char(substr);
    const std::string_view b = first_char(rest), post_substr = after_first_char(rest);
    new_str.append("{").append(a).append("}");
    if (b != "{")
      new_str.append("{").append(b).append("}");
    else
      new_str.append(b);
    new_str += post_substr;
  }
  return new_str;
}

// "a/b" -> "\frac{a}{b}" when a and b are integers written as Python prints them.
std::string fix_a_slash_b(const std::string& string) {
  const std::vector<std::string_view> parts = python_split(string, "/");
  if (parts.size() != 2 || !is_canonical_int(parts[0]) || !is_canonical_int(parts[1])) return string;
  return std::string("\\frac{").append(parts[0]).append("}{").append(parts[1]).append("}");
}

// "\text{ " only ever describes units: drop it and what follows.
std::optional<std::string> remove_right_units(const std::string& string) {
  if (!contains(string, "\\text{ ")) return string;
  const std::vector<std::string_view> splits = python_split(string, "\\text{ ");
  if (splits.size() != 2) return std::nullopt;  // AssertionError
  return std::string(splits[0]);
}

// "\sqrt3" -> "\sqrt{3}".
std::optional<std::string> fix_sqrt(const std::string& string) {
  if (!contains(string, "\\sqrt")) return string;
  const std::vector<std::string_view> splits = python_split(string, "\\sqrt");
  std::string new_string(splits[0]);
  for (size_t i = 1; i < splits.size(); ++i) {
    const std::string_view piece = splits[i];
    if (piece.empty()) return std::nullopt;  // split[0]: IndexError
    if (piece[0] != '{')
      new_string.append("\\sqrt{").append(first_char(piece)).append("}").append(after_first_char(piece));
    else
      new_string.append("\\sqrt").append(piece);
  }
  return new_string;
}

}  // namespace

std::optional<std::string> last_boxed_only_string(std::string_view text) {
  size_t idx = text.rfind("\\boxed");
  if (contains(text, "\\boxed ")) {
    const std::string_view after_last = python_split(text, "\\boxed ").back();
    return "\\boxed " + std::string(python_split(after_last, "$")[0]);
  }
  if (idx == std::string_view::npos) {
    idx = text.rfind("\\fbox");
    if (idx == std::string_view::npos) return std::nullopt;
  }
  int num_left_braces_open = 0;
  for (size_t i = idx; i < text.size(); ++i) {
    if (text[i] == '{') ++num_left_braces_open;
    if (text[i] == '}' && --num_left_braces_open == 0) return std::string(text.substr(idx, i - idx + 1));
  }
  return std::nullopt;
}

std::optional<std::string> remove_boxed(std::string_view boxed) {
  if (contains(boxed, "\\boxed ")) {
    if (!boxed.starts_with("\\boxed ")) return std::nullopt;
    return std::string(boxed.substr(7));
  }
  constexpr std::string_view kLeft = "\\boxed{";
  if (!boxed.starts_with(kLeft) || !boxed.ends_with('}')) return std::nullopt;  // "\fbox{...}" lands here
  return std::string(boxed.substr(kLeft.size(), boxed.size() - kLeft.size() - 1));
}

std::optional<std::string> math_strip_string(std::string_view answer) {
  std::string string = python_replace(answer, "\n", "");  // line breaks
  string = python_replace(string, "\\!", "");   // inverse spaces
  string = python_replace(string, "\\\\", "\\");
  string = python_replace(string, "tfrac", "frac");
  string = python_replace(string, "dfrac", "frac");
  string = python_replace(string, "\\left", "");
  string = python_replace(string, "\\right", "");
  string = python_replace(string, "^{\\circ}", "");  // degrees
  string = python_replace(string, "^\\circ", "");
  string = python_replace(string, "\\$", "");  // dollar signs
  const std::optional<std::string> without_units = remove_right_units(string);
  if (!without_units) return std::nullopt;
  string = python_replace(*without_units, "\\\\%", "");  // percentages
  string = python_replace(string, "\\%", "");
  // " 0." is " ." and "{0." is "{."; a leading "." gets its "0".
  string = python_replace(string, " .", " 0.");
  string = python_replace(string, "{.", "{0.");
  if (string.empty()) return string;
  if (string[0] == '.') string = "0" + string;
  // "k = 5" -> "5" when the left side is at most two characters.
  const std::vector<std::string_view> sides = python_split(string, "=");
  if (sides.size() == 2 && num_code_points(sides[0]) <= 2) string = std::string(sides[1]);
  const std::optional<std::string> with_sqrt_braces = fix_sqrt(string);
  if (!with_sqrt_braces) return std::nullopt;
  string = python_replace(*with_sqrt_braces, " ", "");
  const std::optional<std::string> with_frac_braces = fix_fracs(string);
  if (!with_frac_braces) return std::nullopt;
  string = *with_frac_braces;
  if (string == "0.5") string = "\\frac{1}{2}";
  return fix_a_slash_b(string);
}

bool math_is_equiv(std::string_view answer, std::string_view ground_truth) {
  const std::optional<std::string> a = math_strip_string(answer), b = math_strip_string(ground_truth);
  if (!a || !b) return answer == ground_truth;
  return *a == *b;
}

double math_compute_score(std::string_view solution_str, std::string_view ground_truth) {
  const std::optional<std::string> boxed = last_boxed_only_string(to_valid_utf8(solution_str));
  if (!boxed) return 0.0;
  const std::optional<std::string> answer = remove_boxed(*boxed);
  return answer && math_is_equiv(*answer, to_valid_utf8(ground_truth)) ? 1.0 : 0.0;
}

RewardScore MathScorer::score(std::string_view solution_str, const nlohmann::json& ground_truth,
                              const nlohmann::json& /*extra_info*/) const {
  return {.score = math_compute_score(solution_str, ground_truth_text(ground_truth, name()))};
}

}  // namespace rf::rl
