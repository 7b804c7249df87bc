// The MATH rule reward against verl's math_reward.py: every expected value below is what verl's own
// strip_string, last_boxed_only_string, remove_boxed and compute_score returned for the same input
// (verl main, Jan 2026, Python 3.11), its quirks included: `\fbox` scores 0, a strip_string that
// raises falls back to comparing the raw strings, characters are code points.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "rl/rewards/math_reward.h"

namespace rf::testing {
namespace {

TEST(MathReward, StripStringMatchesHendrycks) {
  struct Case {
    std::string input;
    std::optional<std::string> output;  // nullopt: Python raises
  };
  const Case cases[] = {
      {"\\frac{1}{2}", "\\frac{1}{2}"},
      {"\\dfrac{1}{2}", "\\frac{1}{2}"},
      {"\\tfrac12", "\\frac{1}{2}"},
      {"\\frac12", "\\frac{1}{2}"},
      {"\\frac1{72}", "\\frac{1}{72}"},
      {"\\frac{72}1", "\\frac{72}1"},
      {"\\frac1", "\\frac1"},
      {"\\frac", std::nullopt},
      {"\\frac\\frac12", std::nullopt},
      {"0.5", "\\frac{1}{2}"},
      {".5", "\\frac{1}{2}"},
      {" .5", "\\frac{1}{2}"},
      {"{.5}", "{0.5}"},
      {"1/2", "\\frac{1}{2}"},
      {"-1/2", "\\frac{-1}{2}"},
      {"01/2", "01/2"},
      {"-0/2", "-0/2"},
      {"1/2/3", "1/2/3"},
      {"a/b", "a/b"},
      {"1 / 2", "\\frac{1}{2}"},
      {"\\sqrt2", "\\sqrt{2}"},
      {"\\sqrt{2}", "\\sqrt{2}"},
      {"\\sqrt", std::nullopt},
      {"2\\sqrt\\sqrt3", std::nullopt},
      {"\\sqrt 3", "\\sqrt{}3"},  // fix_sqrt braces the space before spaces are removed
      {"k = 3", "3"},
      {"k=3", "3"},
      {"abc = 3", "abc=3"},
      {"x = y = 3", "x=y=3"},
      {"=3", "3"},
      {"5\\text{ cm}", "5"},
      {"5\\text{ cm}\\text{ s}", std::nullopt},
      {"5\\text{cm}", "5\\text{cm}"},
      {"90^\\circ", "90"},
      {"90^{\\circ}", "90"},
      {"\\$5", "5"},
      {"50\\%", "50"},
      {"50\\\\%", "50"},
      {"\\left( 1, 2 \\right)", "(1,2)"},
      {"1\\!000", "1000"},
      {"a\\\\b", "a\\b"},
      {"x\n+1", "x+1"},
      {"x + 1", "x+1"},
      {"", ""},
      {"\u03C0=3", "3"},
      {"\u03C0\u03C0=3", "3"},
      {"\u03C0\u03C0\u03C0=3", "\u03C0\u03C0\u03C0=3"},
      {"\\frac\u03C02", "\\frac{\u03C0}{2}"},
      {"\\sqrt\u03C0", "\\sqrt{\u03C0}"},
      {"\\frac\u03C0{2}", "\\frac{\u03C0}{2}"},
  };
  for (const Case& c : cases) EXPECT_EQ(rl::math_strip_string(c.input), c.output) << c.input;
}

TEST(MathReward, LastBoxedMatchesVerl) {
  struct Case {
    std::string text;
    std::optional<std::string> boxed;   // last_boxed_only_string
    std::optional<std::string> answer;  // remove_boxed(boxed); nullopt where it asserts
  };
  const Case cases[] = {
      {"The answer is \\boxed{5}.", "\\boxed{5}", "5"},
      {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"},
      {"\\boxed{1} then \\boxed{2}", "\\boxed{2}", "2"},
      {"\\fbox{5}", "\\fbox{5}", std::nullopt},  // found, then remove_boxed asserts it starts with \boxed{
      {"no box", std::nullopt, std::nullopt},
      {"\\boxed{5", std::nullopt, std::nullopt},
      {"\\boxed 5$ and more", "\\boxed 5", "5"},
      {"\\boxed 5", "\\boxed 5", "5"},
      {"\\boxed{3} then \\boxed 4$", "\\boxed 4", "4"},
      {"\\boxed 4 then \\boxed{3}", "\\boxed 4 then \\boxed{3}", "4 then \\boxed{3}"},  // the "\boxed " form wins
      {"\\boxed\\frac{1}{2}", "\\boxed\\frac{1}", std::nullopt},
      {"$\\boxed{x^{2}}$", "\\boxed{x^{2}}", "x^{2}"},
      {"\\boxed{}", "\\boxed{}", ""},
      {"\\boxed}{5}", std::nullopt, std::nullopt},
  };
  for (const Case& c : cases) {
    const std::optional<std::string> boxed = rl::last_boxed_only_string(c.text);
    EXPECT_EQ(boxed, c.boxed) << c.text;
    EXPECT_EQ(boxed ? rl::remove_boxed(*boxed) : std::nullopt, c.answer) << c.text;
  }
}

TEST(MathReward, ComputeScoreMatchesVerl) {
  struct Case {
    std::string solution_str, ground_truth;
    double score;
  };
  const Case cases[] = {
      {"The answer is $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}", 1.0},
      {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}", 1.0},
      {"\\boxed{1} then \\boxed{2}", "2", 1.0},
      {"\\boxed{1} then \\boxed{2}", "1", 0.0},
      {"\\fbox{5}", "5", 0.0},
      {"\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", 1.0},
      {"\\boxed{\\tfrac34}", "\\frac{3}{4}", 1.0},
      {"\\boxed{x + 1}", "x+1", 1.0},
      {"\\boxed{5\\text{ cm}}", "5", 1.0},
      {"\\boxed{90^\\circ}", "90", 1.0},
      {"\\boxed{90^{\\circ}}", "90", 1.0},
      {"\\boxed{0.5}", "\\frac{1}{2}", 1.0},
      {"\\boxed{.5}", "\\frac12", 1.0},
      {"\\boxed{1/2}", "\\frac{1}{2}", 1.0},
      {"\\boxed{k = 3}", "3", 1.0},
      {"\\boxed{abc = 3}", "3", 0.0},
      {"\\boxed{\\sqrt2}", "\\sqrt{2}", 1.0},
      {"no box, 5", "5", 0.0},
      {"\\boxed{5", "5", 0.0},
      {"\\boxed 5$.", "5", 1.0},
      {"\\boxed{\\left( 1, 2 \\right)}", "(1,2)", 1.0},
      {"\\boxed{\\$5}", "5", 1.0},
      {"\\boxed{50\\%}", "50", 1.0},
      {"\\boxed{1\\text{ m}\\text{ s}}", "1\\text{ m}\\text{ s}", 1.0},
      {"\\boxed{1\\text{ m}\\text{ s}}", "1", 0.0},
      {"\\boxed{\\sqrt}", "\\sqrt", 1.0},  // strip_string raises: raw strings compared
      {"\\boxed{ \\sqrt}", "\\sqrt", 0.0},
      {"\\boxed{\\frac}", "\\frac", 1.0},
      {"\\boxed{\\frac\u03C02}", "\\frac{\u03C0}{2}", 1.0},
      {"\\boxed{\u03C0\u03C0=3}", "3", 1.0},
      {"\\boxed{-1/2}", "\\frac{-1}{2}", 1.0},
      {"\\boxed{01/2}", "\\frac{1}{2}", 0.0},
      {"\\boxed{1,000}", "1000", 0.0},
      {"\\boxed{\\text{(A)}}", "A", 0.0},
      {"\\boxed{10}", "10.0", 0.0},
  };
  for (const Case& c : cases)
    EXPECT_EQ(rl::math_compute_score(c.solution_str, c.ground_truth), c.score)
        << c.solution_str << " vs " << c.ground_truth;
}

TEST(MathReward, ScorerReadsAStringGroundTruth) {
  const rl::MathScorer scorer;
  EXPECT_EQ(scorer.score("so \\boxed{\\dfrac{1}{2}}", "0.5", nullptr).score, 1.0);
  EXPECT_EQ(scorer.score("so \\boxed{3}", 3, nullptr).score, 1.0);  // a numeric ground truth reads as its text
  EXPECT_EQ(scorer.score("so \\boxed{3}", "4", nullptr).score, 0.0);
  EXPECT_TRUE(scorer.score("so \\boxed{3}", "3", nullptr).extra.empty());
  EXPECT_THROW(scorer.score("so \\boxed{3}", nullptr, nullptr), Error);
}

}  // namespace
}  // namespace rf::testing
