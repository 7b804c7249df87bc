// Built-in tasks: examples are a pure function of (seed, split, index), have the documented format,
// val problems never appear in train (checked against the predicate over the whole 2-digit space and
// against 100k train draws), scoring is a trimmed exact match, and make_task reports bad names and
// kwargs with their key paths. Also IndexPermutation, which the arith split relies on.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "data/builtin_tasks.h"
#include "data/data_cursor.h"
#include "data/index_permutation.h"
#include "support/test_support.h"

namespace rf::data {
namespace {

struct ArithProblem {
  uint64_t a, b;
};

// "12+34=" -> (12, 34); fails the test on anything else.
ArithProblem parse_arith_prompt(const std::string& prompt) {
  const size_t plus = prompt.find('+');
  EXPECT_NE(plus, std::string::npos) << prompt;
  EXPECT_EQ(prompt.back(), '=') << prompt;
  return {std::stoull(prompt.substr(0, plus)), std::stoull(prompt.substr(plus + 1, prompt.size() - plus - 2))};
}

using testing::expect_config_error;

// ---- IndexPermutation -------------------------------------------------------------------------------

TEST(IndexPermutation, IsABijectionWithItsInverse) {
  for (uint64_t size : {1, 2, 3, 4, 5, 7, 100, 1000, 4097, 12345}) {
    const IndexPermutation p(size, 42);
    std::vector<bool> hit(size, false);
    for (uint64_t x = 0; x < size; ++x) {
      const uint64_t y = p.forward(x);
      ASSERT_LT(y, size) << "size " << size;
      EXPECT_FALSE(hit[y]) << "size " << size << ": " << y << " hit twice";
      hit[y] = true;
      EXPECT_EQ(p.inverse(y), x) << "size " << size;
    }
  }
}

TEST(IndexPermutation, ShufflesAndDependsOnTheKey) {
  const IndexPermutation a(1000, 1), b(1000, 2);
  int num_fixed = 0, num_same = 0;
  for (uint64_t x = 0; x < 1000; ++x) {
    num_fixed += a.forward(x) == x;
    num_same += a.forward(x) == b.forward(x);
  }
  EXPECT_LT(num_fixed, 10);  // a random permutation has one fixed point on average
  EXPECT_LT(num_same, 10);
}

TEST(IndexPermutation, HandlesHugeDomains) {
  for (uint64_t size : {uint64_t(1'000'000'000'000'000'000), ~uint64_t(0)}) {
    const IndexPermutation p(size, 7);
    for (uint64_t x : {uint64_t(0), uint64_t(1), size / 3, size - 1}) {
      const uint64_t y = p.forward(x);
      EXPECT_LT(y, size);
      EXPECT_EQ(p.inverse(y), x);
    }
  }
  EXPECT_THROW(IndexPermutation(10, 0).forward(10), Error);
}

// ---- arith ------------------------------------------------------------------------------------------

TEST(ArithTask, ExamplesHaveTheDocumentedFormat) {
  const auto task = make_task("arith", nullptr, 1);
  EXPECT_EQ(task->name(), "arith");
  const Example first = task->example(Split::train, 0);
  bool saw_two_digit_operand = false;
  for (uint64_t i = 0; i < 2000; ++i) {
    const Example e = task->example(Split::train, i);
    const ArithProblem p = parse_arith_prompt(e.prompt);
    EXPECT_LT(p.a, 100u);
    EXPECT_LT(p.b, 100u);
    EXPECT_EQ(e.prompt, fmt::format("{}+{}=", p.a, p.b));  // no leading zeros
    EXPECT_EQ(e.response, std::to_string(p.a + p.b));
    EXPECT_EQ(e.ground_truth, e.response);
    saw_two_digit_operand |= p.a >= 10 || p.b >= 10;
  }
  EXPECT_TRUE(saw_two_digit_operand);

  const auto three = make_task("arith", {{"digits", 3}}, 1);
  uint64_t largest = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    const ArithProblem p = parse_arith_prompt(three->example(Split::train, i).prompt);
    largest = std::max({largest, p.a, p.b});
  }
  EXPECT_GE(largest, 100u);
  EXPECT_LT(largest, 1000u);
}

TEST(ArithTask, ExamplesArePureFunctionsOfSeedSplitAndIndex) {
  const auto a = make_task("arith", nullptr, 11), b = make_task("arith", nullptr, 11);
  const auto other_seed = make_task("arith", nullptr, 12);
  int num_differ = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(a->example(Split::train, i).prompt, b->example(Split::train, i).prompt);
    num_differ += a->example(Split::train, i).prompt != other_seed->example(Split::train, i).prompt;
    // Val problems are the same in every run.
    EXPECT_EQ(a->example(Split::val, i).prompt, other_seed->example(Split::val, i).prompt);
  }
  EXPECT_GT(num_differ, 150);
  // Random access: index 5000 alone equals index 5000 reached after others.
  EXPECT_EQ(make_task("arith", nullptr, 11)->example(Split::train, 5000).prompt,
            a->example(Split::train, 5000).prompt);
}

TEST(ArithTask, ValProblemsNeverAppearInTrain) {
  const auto task = make_task("arith", nullptr, 3);
  const auto& arith = dynamic_cast<const ArithTask&>(*task);
  ASSERT_EQ(task->num_val_examples(), 1000u);  // a tenth of the 10^4 two-digit problems

  // The predicate splits the whole problem space: exactly num_val problems are val.
  uint64_t num_val_problems = 0;
  for (uint64_t a = 0; a < 100; ++a)
    for (uint64_t b = 0; b < 100; ++b) num_val_problems += arith.is_val_problem(a, b);
  EXPECT_EQ(num_val_problems, 1000u);

  // Val index i is the i-th val problem: all of them, each once.
  std::set<std::string> val_prompts;
  for (uint64_t i = 0; i < task->num_val_examples(); ++i) {
    const Example e = task->example(Split::val, i);
    const ArithProblem p = parse_arith_prompt(e.prompt);
    EXPECT_TRUE(arith.is_val_problem(p.a, p.b)) << e.prompt;
    EXPECT_EQ(e.response, std::to_string(p.a + p.b));
    val_prompts.insert(e.prompt);
  }
  EXPECT_EQ(val_prompts.size(), 1000u);

  std::set<std::string> train_prompts;
  for (uint64_t i = 0; i < 100'000; ++i) {
    const Example e = task->example(Split::train, i);
    ASSERT_EQ(val_prompts.count(e.prompt), 0u) << "train index " << i << " is val problem " << e.prompt;
    train_prompts.insert(e.prompt);
  }
  // 100k uniform draws from the 9000 train problems miss ~9000 e^(-100000/9000) = 0.14 of them.
  EXPECT_LE(train_prompts.size(), 9000u);
  EXPECT_GE(train_prompts.size(), 8995u);
}

TEST(ArithTask, ValIndexMustBeInsideTheValSet) {
  const auto task = make_task("arith", {{"digits", 1}, {"num_val", 5}}, 0);
  EXPECT_EQ(task->num_val_examples(), 5u);
  EXPECT_NO_THROW(task->example(Split::val, 4));
  try {
    task->example(Split::val, 5);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("val index 5 is outside the 5 val problems"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ArithTask::default_num_val(1), 10u);
  EXPECT_EQ(ArithTask::default_num_val(3), 1000u);
}

// ---- reversal ---------------------------------------------------------------------------------------

TEST(ReversalTask, ExamplesHaveTheDocumentedFormat) {
  const auto task = make_task("reversal", {{"min_len", 3}, {"max_len", 5}}, 9);
  EXPECT_EQ(task->name(), "reversal");
  std::set<size_t> lengths;
  for (uint64_t i = 0; i < 500; ++i) {
    const Example e = task->example(Split::train, i);
    ASSERT_GE(e.prompt.size(), 2u);
    const std::string s = e.prompt.substr(0, e.prompt.size() - 1);
    EXPECT_EQ(e.prompt.back(), '=');
    EXPECT_EQ(s.find_first_not_of("abcdefghijklmnopqrstuvwxyz"), std::string::npos) << s;
    EXPECT_EQ(e.response, std::string(s.rbegin(), s.rend()));
    EXPECT_EQ(e.ground_truth, e.response);
    lengths.insert(s.size());
  }
  EXPECT_EQ(lengths, (std::set<size_t>{3, 4, 5}));
}

TEST(ReversalTask, ExamplesArePureFunctionsOfSeedSplitAndIndex) {
  const auto a = make_task("reversal", nullptr, 5), b = make_task("reversal", nullptr, 5);
  const auto other_seed = make_task("reversal", nullptr, 6);
  int num_differ = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(a->example(Split::train, i).prompt, b->example(Split::train, i).prompt);
    num_differ += a->example(Split::train, i).prompt != other_seed->example(Split::train, i).prompt;
    EXPECT_EQ(a->example(Split::val, i).prompt, other_seed->example(Split::val, i).prompt);
  }
  EXPECT_GT(num_differ, 150);
}

TEST(ReversalTask, ValStringsNeverAppearInTrain) {
  const auto task = make_task("reversal", {{"min_len", 1}, {"max_len", 3}, {"num_val", 300}}, 2);
  ASSERT_EQ(task->num_val_examples(), 300u);
  std::unordered_set<std::string> val;
  for (uint64_t i = 0; i < 300; ++i) {
    const std::string prompt = task->example(Split::val, i).prompt;
    EXPECT_TRUE(ReversalTask::is_val_string(prompt.substr(0, prompt.size() - 1))) << prompt;
    val.insert(prompt);
  }
  EXPECT_EQ(val.size(), 300u);  // distinct
  size_t num_short = 0;
  for (uint64_t i = 0; i < 20'000; ++i) {
    const std::string prompt = task->example(Split::train, i).prompt;
    ASSERT_EQ(val.count(prompt), 0u) << "train index " << i << " is val string " << prompt;
    EXPECT_FALSE(ReversalTask::is_val_string(prompt.substr(0, prompt.size() - 1)));
    num_short += prompt.size() <= 3;
  }
  EXPECT_GT(num_short, 10'000u);  // lengths 1 and 2 (a third each): the small spaces are exercised
  // About one string in kHeldOutModulus is held out.
  size_t num_held_out = 0;
  for (char a = 'a'; a <= 'z'; ++a)
    for (char b = 'a'; b <= 'z'; ++b) num_held_out += ReversalTask::is_val_string(std::string{a, b});
  EXPECT_GT(num_held_out, 676u / 20);
  EXPECT_LT(num_held_out, 676u / 5);
}

TEST(ReversalTask, TooFewHeldOutStringsIsAConfigError) {
  // 26 one-letter strings hold only a few held-out ones.
  expect_config_error([] { make_task("reversal", {{"min_len", 1}, {"max_len", 1}, {"num_val", 26}}, 0); },
                      "data.task_kwargs.num_val", "distinct held-out strings of length 1..1");
}

// ---- scoring, factory, cursor -----------------------------------------------------------------------

TEST(TaskScore, ExactMatchAfterTrimming) {
  const auto arith = make_task("arith", nullptr, 0);
  EXPECT_EQ(arith->score("46", "46").acc, 1.0);
  EXPECT_EQ(arith->score(" 46\n", "46").acc, 1.0);
  EXPECT_EQ(arith->score("46", "\t46 ").acc, 1.0);
  EXPECT_EQ(arith->score("47", "46").acc, 0.0);
  EXPECT_EQ(arith->score("4 6", "46").acc, 0.0);
  EXPECT_EQ(arith->score("", "46").acc, 0.0);
  EXPECT_EQ(arith->score("460", "46").acc, 0.0);
  const auto reversal = make_task("reversal", nullptr, 0);
  const Example e = reversal->example(Split::val, 0);
  EXPECT_EQ(reversal->score(e.response + "\n", e.ground_truth).acc, 1.0);
  EXPECT_EQ(reversal->score(e.prompt, e.ground_truth).acc, 0.0);
}

TEST(MakeTask, ReportsBadNamesAndKwargsWithTheirKeyPaths) {
  expect_config_error([] { make_task("sorting", nullptr, 0); }, "data.task", "unknown task 'sorting'");
  expect_config_error([] { make_task("arith", {{"digit", 2}}, 0); }, "data.task_kwargs.digit",
                      "expected one of digits, num_val");
  expect_config_error([] { make_task("reversal", {{"digits", 2}}, 0); }, "data.task_kwargs.digits",
                      "unknown key for task 'reversal'");
  expect_config_error([] { make_task("arith", {{"digits", "two"}}, 0); }, "data.task_kwargs.digits",
                      "expected an integer, got \"two\"");
  expect_config_error([] { make_task("arith", {{"digits", 2.5}}, 0); }, "data.task_kwargs.digits",
                      "expected an integer");
  // What config::yaml_to_json makes of `digits: 1e999`; nlohmann would print it as null.
  expect_config_error([] { make_task("arith", {{"digits", std::numeric_limits<double>::infinity()}}, 0); },
                      "data.task_kwargs.digits", "expected an integer, got inf");
  expect_config_error([] { make_task("arith", {{"digits", 0}}, 0); }, "data.task_kwargs.digits", "0 is outside [1, 9]");
  expect_config_error([] { make_task("arith", {{"digits", 10}}, 0); }, "data.task_kwargs.digits", "10 is outside");
  expect_config_error([] { make_task("arith", {{"digits", 1}, {"num_val", 100}}, 0); }, "data.task_kwargs.num_val",
                      "100 is outside [1, 100)");
  expect_config_error([] { make_task("arith", {{"num_val", -1}}, 0); }, "data.task_kwargs.num_val", "-1 is outside");
  expect_config_error([] { make_task("reversal", {{"min_len", 0}}, 0); }, "data.task_kwargs.min_len", "0 is outside");
  expect_config_error([] { make_task("reversal", {{"min_len", 5}, {"max_len", 4}}, 0); },
                      "data.task_kwargs.max_len", "4 is outside [5, 64]");
  expect_config_error([] { make_task("arith", nlohmann::json::array({2}), 0); }, "data.task_kwargs",
                      "expected a mapping");
  EXPECT_EQ(make_task("reversal", nlohmann::json::object(), 0)->num_val_examples(), 200u);
  EXPECT_EQ(task_alphabet("reversal"), "abcdefghijklmnopqrstuvwxyz=");
}

TEST(DataCursor, TaskStreamResumesExactly) {
  const auto task = make_task("arith", nullptr, 21);
  DataCursor cursor{.seed = 21};
  std::vector<std::string> uninterrupted;
  for (int i = 0; i < 10; ++i) uninterrupted.push_back(take_example(*task, cursor).prompt);
  EXPECT_EQ(cursor.next_index, 10u);
  EXPECT_EQ(cursor.epoch, 0u);

  DataCursor replay{.seed = 21};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(take_example(*task, replay).prompt, uninterrupted[size_t(i)]);
  DataCursor resumed = DataCursor::from_json(nlohmann::json::parse(replay.to_json().dump()), "checkpoint");
  EXPECT_EQ(resumed, replay);
  const auto restarted_task = make_task("arith", nullptr, resumed.seed);
  for (int i = 4; i < 10; ++i) EXPECT_EQ(take_example(*restarted_task, resumed).prompt, uninterrupted[size_t(i)]);
}

}  // namespace
}  // namespace rf::data
