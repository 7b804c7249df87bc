// The countdown rule reward against TinyZero's countdown.py, and its equation evaluator against
// Python's eval: every expected value below is what that code returned for the same input (Python
// 3.11), SyntaxError, ZeroDivisionError and friends included.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "rl/rewards/countdown_reward.h"
#include "rl/rewards/python_arithmetic.h"

namespace rf::testing {
namespace {

using rl::PyNumber;

void expect_same_number(const std::optional<PyNumber>& actual, const std::optional<PyNumber>& expected,
                        const std::string& context) {
  ASSERT_EQ(actual.has_value(), expected.has_value()) << context;
  if (!expected) return;
  ASSERT_EQ(actual->kind, expected->kind) << context;
  if (expected->kind == PyNumber::Kind::integer)
    EXPECT_EQ(actual->integer, expected->integer) << context;
  else
    EXPECT_EQ(actual->real, expected->real) << context;  // the same IEEE operations, bit for bit
}

TEST(PythonArithmetic, MatchesPythonEval) {
  struct Case {
    std::string expression;
    std::optional<PyNumber> value;  // nullopt: Python raises
  };
  const Case cases[] = {
      {"1+2", PyNumber::of_int(3)},
      {"00", PyNumber::of_int(0)},
      {"01", std::nullopt},  // SyntaxError: leading zeros
      {"0012", std::nullopt},
      {"0012.", PyNumber::of_real(12.0)},
      {"00.5", PyNumber::of_real(0.5)},
      {"01.5", PyNumber::of_real(1.5)},
      {"1.", PyNumber::of_real(1.0)},
      {".5+1", PyNumber::of_real(1.5)},
      {"1..2", std::nullopt},
      {"1 .2", std::nullopt},
      {"5.5.5", std::nullopt},
      {".", std::nullopt},
      {"2**3", PyNumber::of_int(8)},
      {"-2**2", PyNumber::of_int(-4)},
      {"2**-1", PyNumber::of_real(0.5)},
      {"2**3**2", PyNumber::of_int(512)},
      {"-(2)**2", PyNumber::of_int(-4)},
      {"2**-3**2", PyNumber::of_real(0.001953125)},
      {"7//2", PyNumber::of_int(3)},
      {"-7//2", PyNumber::of_int(-4)},
      {"7//-2", PyNumber::of_int(-4)},
      {"7.5//2", PyNumber::of_real(3.0)},
      {"-7.5//2", PyNumber::of_real(-4.0)},
      {"1//0.1", PyNumber::of_real(9.0)},  // not floor(1 / 0.1) == 10
      {"0.3//0.1", PyNumber::of_real(2.0)},
      {"7/2", PyNumber::of_real(3.5)},
      {"1/0", std::nullopt},     // ZeroDivisionError
      {"4//0.0", std::nullopt},  // ZeroDivisionError
      {"0**-1", std::nullopt},   // ZeroDivisionError
      {"0.0**-1", std::nullopt},
      {"(-8)**(1/3)", std::nullopt},  // complex in Python
      {"(-8)**2.0", PyNumber::of_real(64.0)},
      {"(-2)**-1", PyNumber::of_real(-0.5)},
      {"2.0**10000", std::nullopt},  // OverflowError
      {"-9223372036854775807-1", PyNumber::of_int(-9223372036854775807LL - 1)},
      {"()", std::nullopt},      // the empty tuple
      {"(1)(2)", std::nullopt},  // TypeError: 'int' object is not callable
      {"1 2", std::nullopt},
      {"--1", PyNumber::of_int(1)},
      {"+-+1", PyNumber::of_int(-1)},
      {"- - 1", PyNumber::of_int(1)},
      {"1+", std::nullopt},
      {"*1", std::nullopt},
      {"1 + (2", std::nullopt},
      {"1 + 2)", std::nullopt},
      {"1***2", std::nullopt},
      {"1///2", std::nullopt},
      {"2* *3", std::nullopt},
      {"1+\t2", PyNumber::of_int(3)},
      {"1+\f2", PyNumber::of_int(3)},
      {"1+\0132", std::nullopt},  // vertical tab: invalid non-printable character
      {"(1+\r2)", PyNumber::of_int(3)},
      {"1+\r2", std::nullopt},
      {"((1+2)*3)", PyNumber::of_int(9)},
      {"(((((1)))))", PyNumber::of_int(1)},
      {"1-(-1)", PyNumber::of_int(2)},
      {"2*-3", PyNumber::of_int(-6)},
      {"+1", PyNumber::of_int(1)},
      {"10-2-3", PyNumber::of_int(5)},
      {"100/10/5", PyNumber::of_real(2.0)},
      {"2*3+4*5", PyNumber::of_int(26)},
      {"2+3*4**2", PyNumber::of_int(50)},
      {"0.1+0.2", PyNumber::of_real(0.30000000000000004)},
      {"1/3", PyNumber::of_real(0.3333333333333333)},
      {"3*(1/3)", PyNumber::of_real(1.0)},
      {"", std::nullopt},
  };
  for (const Case& c : cases) expect_same_number(rl::eval_python_arithmetic(c.expression), c.value, c.expression);
}

TEST(PythonArithmetic, ParenthesesNestTwoHundredDeep) {
  const auto nested = [](int depth) { return std::string(size_t(depth), '(') + "1" + std::string(size_t(depth), ')'); };
  expect_same_number(rl::eval_python_arithmetic(nested(200)), PyNumber::of_int(1), "200 deep");
  expect_same_number(rl::eval_python_arithmetic(nested(201)), std::nullopt, "201 deep: too many nested parentheses");
}

TEST(PythonArithmetic, RejectsWhatTheCountdownPatternRejects) {
  // Valid Python, but outside ^[\d+\-*/().\s]+$, which TinyZero checks before eval.
  for (const char* expression : {"1e5", "1_0", "2 % 3", "abs(1)", "1 == 1", "[1]"})
    EXPECT_EQ(rl::eval_python_arithmetic(expression), std::nullopt) << expression;
}

TEST(PythonArithmetic, LeavesInt64ForDoubleWhereOverflowing) {
  // Python's ints are unbounded (2**62 + 2**62 == 9223372036854775808 exactly); ours continue in double.
  expect_same_number(rl::eval_python_arithmetic("2**62+2**62"), PyNumber::of_real(9223372036854775808.0), "sum");
  expect_same_number(rl::eval_python_arithmetic("3037000500*3037000500"),
                     PyNumber::of_real(3037000500.0 * 3037000500.0), "product");
  expect_same_number(rl::eval_python_arithmetic("99999999999999999999"), PyNumber::of_real(1e20), "literal");
}

std::string with_prompt(const std::string& answer) {
  return "User: Using the numbers [2, 3, 4], create an equation that equals 20.\n"
         "Assistant: Let me solve this step by step.\n<think>2+3=5, 5*4=20</think>\n" +
         answer;
}

TEST(CountdownReward, MatchesTinyZero) {
  struct Case {
    std::string name, solution_str;
    PyNumber target;
    std::vector<int64_t> numbers;
    std::optional<std::string> equation;  // extract_solution
    double score;                         // compute_score with TinyZero's defaults (format 0.1, score 1)
  };
  const PyNumber t20 = PyNumber::of_int(20);
  const std::vector<int64_t> n234 = {2, 3, 4};
  const Case cases[] = {
      {"correct", with_prompt("<answer>(2 + 3) * 4</answer>"), t20, n234, "(2 + 3) * 4", 1.0},
      {"numbers in another order", with_prompt("<answer>4 * (3 + 2)</answer>"), t20, n234, "4 * (3 + 2)", 1.0},
      {"wrong result", with_prompt("<answer>2 + 3 * 4</answer>"), t20, n234, "2 + 3 * 4", 0.1},
      {"a number not given", with_prompt("<answer>(2 + 3) * 5</answer>"), t20, n234, "(2 + 3) * 5", 0.1},
      {"a number reused", with_prompt("<answer>(2 + 2) * 3</answer>"), t20, n234, "(2 + 2) * 3", 0.1},
      {"a number missing", with_prompt("<answer>5 * 4</answer>"), t20, n234, "5 * 4", 0.1},
      {"a number extra", with_prompt("<answer>(2 + 3) * 4 + 0</answer>"), t20, n234, "(2 + 3) * 4 + 0", 0.1},
      {"division", with_prompt("<answer>8 / 2 * 4</answer>"), PyNumber::of_int(16), {8, 2, 4}, "8 / 2 * 4", 1.0},
      {"a float target", with_prompt("<answer>5 / 2</answer>"), PyNumber::of_real(2.5), {5, 2}, "5 / 2", 1.0},
      {"division within 1e-5", with_prompt("<answer>1 / 3 * 3</answer>"), PyNumber::of_int(1), {1, 3, 3}, "1 / 3 * 3",
       1.0},
      {"floor division", with_prompt("<answer>7 // 2</answer>"), PyNumber::of_int(3), {7, 2}, "7 // 2", 1.0},
      {"power", with_prompt("<answer>2 ** 3</answer>"), PyNumber::of_int(8), {2, 3}, "2 ** 3", 1.0},
      {"division by zero", with_prompt("<answer>5 / 0</answer>"), PyNumber::of_int(5), {5, 0}, "5 / 0", 0.1},
      {"unbalanced parenthesis", with_prompt("<answer>(2 + 3 * 4</answer>"), t20, n234, "(2 + 3 * 4", 0.1},
      {"a letter", with_prompt("<answer>(2 + 3) x 4</answer>"), t20, n234, "(2 + 3) x 4", 0.1},
      {"an equals sign", with_prompt("<answer>(2 + 3) * 4 = 20</answer>"), t20, {2, 3, 4, 20}, "(2 + 3) * 4 = 20",
       0.1},
      {"a leading zero", with_prompt("<answer>(02 + 3) * 4</answer>"), t20, n234, "(02 + 3) * 4", 0.1},
      {"empty answer", with_prompt("<answer></answer>"), t20, n234, "", 0.1},
      {"white space around the equation", with_prompt("<answer> \t(2 + 3) * 4  </answer>"), t20, n234,
       "(2 + 3) * 4", 1.0},
      {"no answer tag", with_prompt("(2 + 3) * 4"), t20, n234, std::nullopt, 0.0},
      {"an unclosed answer tag", with_prompt("<answer>(2 + 3) * 4"), t20, n234, std::nullopt, 0.0},
      {"no Assistant marker", "<answer>(2 + 3) * 4</answer>", t20, n234, std::nullopt, 0.0},
      {"the Qwen chat marker",
       "<|im_start|>user\nUse [2, 3, 4] to make 20.<|im_end|>\n"
       "<|im_start|>assistant\n<answer>(2 + 3) * 4</answer>",
       t20, n234, "(2 + 3) * 4", 1.0},
      {"the answer is not on the last line", with_prompt("<answer>(2 + 3) * 4</answer>\nDone."), t20, n234,
       std::nullopt, 0.0},
      {"the last answer on the line counts", with_prompt("<answer>2 + 3 + 4</answer> no: <answer>(2 + 3) * 4</answer>"),
       t20, n234, "(2 + 3) * 4", 1.0},
      {"the last answer on the line counts, wrong",
       with_prompt("<answer>(2 + 3) * 4</answer> no: <answer>2 + 3 + 4</answer>"), t20, n234, "2 + 3 + 4", 0.1},
      {"the first Assistant marker splits", "Assistant: Assistant: <answer>(2 + 3) * 4</answer>", t20, n234,
       "(2 + 3) * 4", 1.0},
      {"unary minus", with_prompt("<answer>-(2 - 3) * 4</answer>"), PyNumber::of_int(4), n234, "-(2 - 3) * 4", 1.0},
      {"a float literal is two numbers", with_prompt("<answer>2.5 * 4</answer>"), PyNumber::of_int(10), {2, 5, 4},
       "2.5 * 4", 1.0},
      {"the empty tuple", with_prompt("<answer>()</answer>"), PyNumber::of_int(0), {}, "()", 0.1},
      {"a call", with_prompt("<answer>2(3)</answer>"), PyNumber::of_int(6), {2, 3}, "2(3)", 0.1},
      {"a carriage return inside parentheses", with_prompt("<answer>(2 +\r3) * 4</answer>"), t20, n234,
       "(2 +\r3) * 4", 1.0},
      {"a carriage return outside parentheses", with_prompt("<answer>2 * 3 +\r14</answer>"), t20, {2, 3, 14},
       "2 * 3 +\r14", 0.1},
      {"a non-ASCII space inside", with_prompt("<answer>(2 +\u00A03) * 4</answer>"), t20, n234,
       "(2 +\u00A03) * 4", 0.1},
      {"a non-ASCII space around is stripped", with_prompt("<answer>(2 + 3) * 4\u3000</answer>"), t20, n234,
       "(2 + 3) * 4", 1.0},
      {"U+001C around is stripped", with_prompt("<answer>\034(2 + 3) * 4</answer>"), t20, n234, "(2 + 3) * 4", 1.0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(rl::countdown_extract_solution(c.solution_str), c.equation) << c.name;
    EXPECT_EQ(rl::countdown_compute_score(c.solution_str, c.target, c.numbers, {}), c.score) << c.name;
  }
}

TEST(CountdownReward, ValidateComparesMultisets) {
  const std::vector<int64_t> numbers = {7, 7, 10};
  EXPECT_TRUE(rl::countdown_validate_equation("7 * 10 - 7", numbers));
  EXPECT_TRUE(rl::countdown_validate_equation("007 * 10 - 7", numbers));  // int("007") == 7
  EXPECT_FALSE(rl::countdown_validate_equation("7 * 10", numbers));
  EXPECT_FALSE(rl::countdown_validate_equation("7 * 10 - 7 - 7", numbers));
  EXPECT_FALSE(rl::countdown_validate_equation("7 * 1 - 7", numbers));
  EXPECT_TRUE(rl::countdown_validate_equation("", {}));
}

TEST(CountdownReward, ScorerReadsTheGroundTruthObject) {
  const rl::CountdownScorer scorer;
  const nlohmann::json ground_truth = {{"target", 20}, {"numbers", {2, 3, 4}}};
  EXPECT_EQ(scorer.score(with_prompt("<answer>(2 + 3) * 4</answer>"), ground_truth, nullptr).score, 1.0);
  EXPECT_EQ(scorer.score(with_prompt("<answer>2 + 3 * 4</answer>"), ground_truth, nullptr).score, 0.1);
  EXPECT_EQ(scorer.score(with_prompt("no answer"), ground_truth, nullptr).score, 0.0);
  const rl::CountdownScorer strict_format({.format_score = 0.0, .score = 2.0});
  EXPECT_EQ(strict_format.score(with_prompt("<answer>(2 + 3) * 4</answer>"), ground_truth, nullptr).score, 2.0);
  EXPECT_EQ(strict_format.score(with_prompt("<answer>2 + 3 * 4</answer>"), ground_truth, nullptr).score, 0.0);
  for (const nlohmann::json& bad : {nlohmann::json("20"), nlohmann::json{{"target", 20}},
                                    nlohmann::json{{"target", "20"}, {"numbers", {2, 3, 4}}},
                                    nlohmann::json{{"target", 20}, {"numbers", {2, 3.5}}}}) {
    try {
      scorer.score("", bad, nullptr);
      ADD_FAILURE() << bad.dump() << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("countdown"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad.dump()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace rf::testing
