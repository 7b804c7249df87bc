// The GSM8K rule reward against verl's gsm8k.py: every expected value below is what verl's own
// extract_solution / compute_score returned for the same input (verl main, Jan 2026, run under
// Python 3.11), including its quirks: the last 300 characters only, `$` never matched, flexible
// keeping commas and a trailing period.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "rl/rewards/gsm8k_reward.h"

namespace rf::testing {
namespace {

using rl::Gsm8kMethod;

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

struct ExtractCase {
  std::string name;
  std::string solution_str;
  std::optional<std::string> strict, flexible;
};

TEST(Gsm8kReward, ExtractSolutionMatchesVerl) {
  const std::string e_acute = "\xC3\xA9";  // two bytes, one character
  const ExtractCase cases[] = {
      {"the GSM8K format", "48 + 24 = 72 clips.\n#### 72", "72", "72"},
      {"commas are removed", "Total: 1,234 apples.\n#### 1,234", "1234", "1,234"},
      {"a negative answer", "She owes money.\n#### -5", "-5", "-5"},
      {"a decimal answer", "#### 72.5", "72.5", "72.5"},
      {"the last #### wins", "#### 5\nNo wait.\n#### 72", "72", "72"},
      {"a dollar sign after the marker: no match", "#### $72", std::nullopt, "72"},
      {"no space after the marker: no match", "####72", std::nullopt, "72"},
      {"two spaces after the marker: no match", "####  72", std::nullopt, "72"},
      {"a lone minus: no match", "#### -", std::nullopt, std::nullopt},
      {"a double minus: no match", "#### --5", std::nullopt, "-5"},
      {"five hashes hold the marker", "##### 72", "72", "72"},
      {"a trailing period is part of the number", "#### 72.", "72.", "72."},
      {"no marker at all", "The answer is 72", std::nullopt, "72"},
      {"no number at all", "I do not know.", std::nullopt, "."},
      {"only a period", "Hmm.", std::nullopt, "."},
      {"periods and a number", "It is 72. Done.", std::nullopt, "72."},
      {"a number then only periods", "7 ...", std::nullopt, "..."},
      {"commas kept by flexible", "1,000 apples", std::nullopt, "1,000"},
      {"a negative number", "it costs -3 dollars", std::nullopt, "-3"},
      {"hyphenated words are not negative numbers", "a well-known 3-step plan", std::nullopt, "3"},
      {"the marker within the last 300 characters", repeat("x", 1000) + "#### 72", "72", "72"},
      {"the marker beyond the last 300 characters", "#### 72" + repeat("x", 300), std::nullopt, std::nullopt},
      {"300 characters counted as code points: kept", "#### 72" + repeat(e_acute, 293), "72", "72"},
      {"300 characters counted as code points: cut", "#### 72" + repeat(e_acute, 299), std::nullopt, "2"},
      {"a long prefix of multi-byte characters", repeat(e_acute, 500) + "#### 72", "72", "72"},
  };
  for (const ExtractCase& c : cases) {
    EXPECT_EQ(rl::gsm8k_extract_solution(c.solution_str, Gsm8kMethod::strict), c.strict) << c.name;
    EXPECT_EQ(rl::gsm8k_extract_solution(c.solution_str, Gsm8kMethod::flexible), c.flexible) << c.name;
  }
}

TEST(Gsm8kReward, ComputeScoreMatchesVerl) {
  struct Case {
    std::string solution_str, ground_truth;
    double strict, flexible;  // with format_score 0.1, so a wrong answer differs from no answer
  };
  const Case cases[] = {
      {"#### 72", "72", 1.0, 1.0},
      {"#### 72", "73", 0.1, 0.1},
      {"no answer", "72", 0.0, 0.0},
      {"#### 1,000", "1000", 1.0, 0.1},
      {"1,000", "1000", 0.0, 0.1},
      {"The answer is 72.", "72", 0.0, 0.1},
      {"The answer is 72", "72", 0.0, 1.0},
      {"#### 72.0", "72", 0.1, 0.1},  // compared as strings
  };
  for (const Case& c : cases) {
    const rl::Gsm8kParams strict{.method = Gsm8kMethod::strict, .format_score = 0.1};
    const rl::Gsm8kParams flexible{.method = Gsm8kMethod::flexible, .format_score = 0.1};
    EXPECT_EQ(rl::gsm8k_compute_score(c.solution_str, c.ground_truth, strict), c.strict) << c.solution_str;
    EXPECT_EQ(rl::gsm8k_compute_score(c.solution_str, c.ground_truth, flexible), c.flexible) << c.solution_str;
  }
}

TEST(Gsm8kReward, ScorerUsesVerlDefaults) {
  const rl::Gsm8kScorer scorer;  // strict, format_score 0, score 1: what default_compute_score calls
  EXPECT_EQ(scorer.score("#### 72", "72", nullptr).score, 1.0);
  EXPECT_EQ(scorer.score("#### 73", "72", nullptr).score, 0.0);
  EXPECT_EQ(scorer.score("The answer is 72", "72", nullptr).score, 0.0);
  EXPECT_TRUE(scorer.score("#### 72", "72", nullptr).extra.empty());
  EXPECT_EQ(scorer.score("#### 72", 72, nullptr).score, 1.0);  // a numeric ground truth reads as its text
  EXPECT_THROW(scorer.score("#### 72", nlohmann::json::array({72}), nullptr), Error);
}

TEST(Gsm8kReward, InvalidUtf8CountsAsReplacementCharacters) {
  // A byte that is not UTF-8 is one U+FFFD, one character of the 300, as after the tokenizer's decode.
  const std::string solution = "#### 72" + std::string(293, '\xFF');
  EXPECT_EQ(rl::gsm8k_extract_solution(solution, Gsm8kMethod::strict), "72");
  EXPECT_EQ(rl::gsm8k_extract_solution(solution + "\xFF", Gsm8kMethod::strict), std::nullopt);
}

}  // namespace
}  // namespace rf::testing
