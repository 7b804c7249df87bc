// PythonRewardFunction against the reward files in python_files/: results in request order whatever
// order the workers finish in, verl's return shapes and reward_kwargs, every way a scorer can fail
// under both failure policies (the pool must keep scoring afterwards), start-up errors as ConfigErrors,
// no worker process left behind, and a verl-style gsm8k file agreeing with the built-in gsm8k rule scorer.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "config/bind.h"
#include "core/error.h"
#include "core/stopwatch.h"
#include "rl/rewards/gsm8k_reward.h"
#include "rl/rewards/python_reward_pool.h"
#include "rl/rewards/reward_function.h"

namespace rf::testing {
namespace {

std::string python_file(std::string_view name) {
  return std::string(RF_RL_TEST_DIR) + "/rewards/python_files/" + std::string(name);
}

rl::PythonRewardConfig config_for(std::string_view file, rl::FailurePolicy on_error = rl::FailurePolicy::fail) {
  rl::PythonRewardConfig config;
  config.path = python_file(file);
  config.on_error = on_error;
  return config;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// (key path, message) of the ConfigError `make` throws.
template <class Make>
std::pair<std::string, std::string> config_error_of(Make&& make) {
  try {
    make();
  } catch (const ConfigError& e) {
    return {e.key_path(), e.what()};
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

// Requests for misbehaving.py: each response names a misbehaviour, or is an answer to ground truth "7".
std::vector<rl::RewardRequest> requests_for(const std::vector<std::string>& responses) {
  std::vector<rl::RewardRequest> requests;
  for (const std::string& response : responses) requests.push_back({"probe", response, "7", nullptr});
  return requests;
}

std::vector<double> scores_of(const std::vector<rl::RewardOutcome>& outcomes) {
  std::vector<double> scores;
  for (const rl::RewardOutcome& outcome : outcomes) scores.push_back(outcome.score.score);
  return scores;
}

TEST(PythonRewardPool, NumbersAndDictsComeBackInRequestOrder) {
  // Every fifth sample sleeps, so the other worker overtakes it; numbers and dicts alternate.
  constexpr int kNumRequests = 50;
  std::vector<rl::RewardRequest> requests;
  for (int i = 0; i < kNumRequests; ++i)
    requests.push_back({i % 2 == 0 ? "number" : "dict", std::to_string(i), i % 3 == 0 ? std::to_string(i) : "-1",
                        {{"delay_s", i % 5 == 0 ? 0.02 : 0.0}}});
  rl::PythonRewardFunction function(config_for("value_and_acc.py"));
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests);
  ASSERT_EQ(outcomes.size(), requests.size());
  for (int i = 0; i < kNumRequests; ++i) {
    const rl::RewardOutcome& outcome = outcomes[size_t(i)];
    EXPECT_FALSE(outcome.error) << i << ": " << *outcome.error;
    EXPECT_EQ(outcome.score.score, i * 0.5) << i;
    // A number has no extras; a dict keeps its numeric `acc` (a bool) and drops `pred` and `note`.
    const std::map<std::string, double> extra =
        i % 2 == 0 ? std::map<std::string, double>{} : std::map<std::string, double>{{"acc", i % 3 == 0 ? 1.0 : 0.0}};
    EXPECT_EQ(outcome.score.extra, extra) << i;
  }
  EXPECT_EQ(rl::count_failures(outcomes), 0);
  EXPECT_EQ(function.num_worker_restarts(), 0);
}

TEST(PythonRewardPool, EachWorkerIsItsOwnProcessAndTheDestructorReapsThem) {
  std::vector<double> pids;
  {
    rl::PythonRewardConfig config = config_for("worker_pid.py");
    config.num_workers = 3;
    rl::PythonRewardFunction function(config);
    pids = scores_of(function.score(requests_for({"a", "b", "c"})));  // one to each idle worker
  }
  std::ranges::sort(pids);
  EXPECT_EQ(std::ranges::adjacent_find(pids), pids.end()) << "two samples were scored by one worker";
  // Reaped, not zombies: a zombie's pid still takes signals.
  for (const double pid : pids) {
    EXPECT_NE(pid, double(::getpid()));
    EXPECT_EQ(::kill(pid_t(pid), 0), -1) << pid;
    EXPECT_EQ(errno, ESRCH) << pid;
  }
}

TEST(PythonRewardPool, TextRoundTripsAndInvalidUtf8ArrivesAsReplacementCharacters) {
  rl::PythonRewardFunction function(config_for("exact_match.py"));
  const std::vector<rl::RewardRequest> requests = {
      {"text", "caf\xC3\xA9 \xE2\x88\x9A\n", "caf\xC3\xA9 \xE2\x88\x9A", nullptr},
      {"text", "46", "47", nullptr},
      {"text", "4\xFF", "4\xEF\xBF\xBD", nullptr},  // a response cut mid-character: U+FFFD, as decoded
  };
  EXPECT_EQ(scores_of(function.score(requests)), (std::vector<double>{1.0, 0.0, 1.0}));
  EXPECT_TRUE(function.score({}).empty());
}

TEST(PythonRewardPool, RewardKwargsArePassedToEveryCall) {
  rl::PythonRewardConfig config = config_for("keyword_arguments.py");
  config.reward_kwargs = {{"scale", 2.0}, {"offset", 3}};
  rl::PythonRewardFunction function(config);
  const std::vector<rl::RewardOutcome> outcomes =
      function.score(std::vector<rl::RewardRequest>{{"a", "abcd", "", nullptr}, {"a", "x", "", nullptr}});
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].score.score, 8.0);
  EXPECT_EQ(outcomes[1].score.score, 2.0);
  EXPECT_EQ(outcomes[0].score.extra, (std::map<std::string, double>{{"num_other_kwargs", 1.0}, {"offset", 3.0}}));

  // Without reward_kwargs the function sees its defaults.
  rl::PythonRewardFunction plain(config_for("keyword_arguments.py"));
  const std::vector<rl::RewardOutcome> defaults =
      plain.score(std::vector<rl::RewardRequest>{{"a", "abcd", "", nullptr}});
  EXPECT_EQ(defaults[0].score.score, 4.0);
  EXPECT_EQ(defaults[0].score.extra, (std::map<std::string, double>{{"num_other_kwargs", 0.0}, {"offset", -1.0}}));
}

TEST(PythonRewardPool, AsyncScorersAreAwaited) {
  rl::PythonRewardFunction function(config_for("async_score.py"));
  EXPECT_EQ(scores_of(function.score(requests_for({"7", "8"}))), (std::vector<double>{1.0, 0.0}));
}

TEST(PythonRewardPool, RaisingScorerUnderOnErrorFailThrowsNamingTheSample) {
  rl::PythonRewardFunction function(config_for("misbehaving.py", rl::FailurePolicy::fail));
  std::vector<rl::RewardRequest> requests = requests_for({"7", "7", "raise", "7"});
  requests[2].data_source = "my/source";
  try {
    function.score(requests);
    ADD_FAILURE() << "a raising scorer did not fail the batch";
  } catch (const ConfigError& e) {
    ADD_FAILURE() << e.what();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(contains(message, "reward sample 2")) << message;
    EXPECT_TRUE(contains(message, "data_source 'my/source'")) << message;
    EXPECT_TRUE(contains(message, python_file("misbehaving.py"))) << message;
    EXPECT_TRUE(contains(message, "ValueError: cannot score '7'")) << message;  // Python's traceback's last line
    EXPECT_TRUE(contains(message, "Traceback (most recent call last)")) << message;
  }
  // The pool is still usable.
  EXPECT_EQ(scores_of(function.score(requests_for({"7", "6", "7"}))), (std::vector<double>{1.0, 0.0, 1.0}));
}

TEST(PythonRewardPool, RaisingScorerUnderOnErrorZeroScoresZeroAndSaysWhy) {
  rl::PythonRewardFunction function(config_for("misbehaving.py", rl::FailurePolicy::zero));
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests_for({"7", "raise", "7"}));
  EXPECT_EQ(scores_of(outcomes), (std::vector<double>{1.0, 0.0, 1.0}));
  ASSERT_TRUE(outcomes[1].error);
  EXPECT_TRUE(contains(*outcomes[1].error, "compute_score raised ValueError: cannot score '7'")) << *outcomes[1].error;
  EXPECT_FALSE(outcomes[0].error);
  EXPECT_EQ(rl::count_failures(outcomes), 1);
}

TEST(PythonRewardPool, ResultsThatAreNotFiniteNumbersFail) {
  rl::PythonRewardFunction function(config_for("misbehaving.py", rl::FailurePolicy::zero));
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests_for({"text", "nan", "no_score", "7"}));
  EXPECT_EQ(scores_of(outcomes), (std::vector<double>{0.0, 0.0, 0.0, 1.0}));
  EXPECT_EQ(rl::count_failures(outcomes), 3);
  const std::pair<size_t, std::string> expected[] = {
      {0, "returned '1.0' (str)"}, {1, "returned nan (float)"}, {2, "returned a dict without 'score'"}};
  for (const auto& [sample, part] : expected) {
    ASSERT_TRUE(outcomes[sample].error) << sample;
    EXPECT_TRUE(contains(*outcomes[sample].error, part)) << *outcomes[sample].error;
    EXPECT_TRUE(outcomes[sample].score.extra.empty());
  }
  EXPECT_EQ(function.num_worker_restarts(), 0);  // a bad value is the scorer's answer, not a broken worker
}

TEST(PythonRewardPool, MalformedAnswersFailTheSampleAndReplaceTheWorker) {
  // A scorer writing to the worker's socket itself: the pool's first request has id 0.
  rl::PythonRewardConfig config = config_for("misbehaving.py", rl::FailurePolicy::zero);
  config.num_workers = 1;
  rl::PythonRewardFunction function(config);
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests_for({"forge", "7"}));
  EXPECT_EQ(scores_of(outcomes), (std::vector<double>{0.0, 1.0}));
  ASSERT_TRUE(outcomes[0].error);
  EXPECT_TRUE(contains(*outcomes[0].error, "unexpected message")) << *outcomes[0].error;
  EXPECT_EQ(function.num_worker_restarts(), 1);
}

TEST(PythonRewardPool, HangingScorerIsKilledAtTheTimeoutAndReplaced) {
  rl::PythonRewardConfig config = config_for("misbehaving.py", rl::FailurePolicy::zero);
  config.timeout_s = 0.5;
  rl::PythonRewardFunction function(config);
  const Stopwatch watch;
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests_for({"hang", "7", "6", "7"}));
  const double seconds = watch.seconds();
  // time.sleep(100) killed at 0.5 s; the rest of the batch went to the other worker meanwhile. The
  // bound leaves room for a loaded machine and is far below the scorer's 100 s.
  EXPECT_GE(seconds, 0.5);
  EXPECT_LT(seconds, 3.0);
  EXPECT_EQ(scores_of(outcomes), (std::vector<double>{0.0, 1.0, 0.0, 1.0}));
  ASSERT_TRUE(outcomes[0].error);
  EXPECT_TRUE(contains(*outcomes[0].error, "timeout_s=0.5")) << *outcomes[0].error;
  EXPECT_EQ(function.num_worker_restarts(), 1);
  // Both workers (one of them the replacement) score the next batch.
  EXPECT_EQ(scores_of(function.score(requests_for({"7", "7", "6", "7"}))), (std::vector<double>{1.0, 1.0, 0.0, 1.0}));

  // Under on_error=fail the timeout stops the batch, as promptly.
  config.on_error = rl::FailurePolicy::fail;
  rl::PythonRewardFunction failing(config);
  const Stopwatch fail_watch;
  try {
    failing.score(requests_for({"7", "hang"}));
    ADD_FAILURE() << "a hanging scorer did not fail the batch";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "reward sample 1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "timeout_s=0.5")) << e.what();
  }
  EXPECT_LT(fail_watch.seconds(), 3.0);
  EXPECT_EQ(scores_of(failing.score(requests_for({"7"}))), (std::vector<double>{1.0}));
}

TEST(PythonRewardPool, CrashingScorerIsReplacedAndTheNextBatchScores) {
  rl::PythonRewardFunction function(config_for("misbehaving.py", rl::FailurePolicy::zero));
  const std::vector<rl::RewardOutcome> outcomes = function.score(requests_for({"exit", "7", "segfault", "6"}));
  EXPECT_EQ(scores_of(outcomes), (std::vector<double>{0.0, 1.0, 0.0, 0.0}));
  ASSERT_TRUE(outcomes[0].error);
  EXPECT_TRUE(contains(*outcomes[0].error, "exited with status 3")) << *outcomes[0].error;
  ASSERT_TRUE(outcomes[2].error);
  EXPECT_TRUE(contains(*outcomes[2].error, "killed by SIGSEGV")) << *outcomes[2].error;
  EXPECT_FALSE(outcomes[3].error);
  EXPECT_EQ(function.num_worker_restarts(), 2);
  EXPECT_EQ(scores_of(function.score(requests_for({"7", "7", "7"}))), (std::vector<double>{1.0, 1.0, 1.0}));

  rl::PythonRewardFunction failing(config_for("misbehaving.py", rl::FailurePolicy::fail));
  try {
    failing.score(requests_for({"segfault"}));
    ADD_FAILURE() << "a crashing scorer did not fail the batch";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "reward sample 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "SIGSEGV")) << e.what();
  }
  EXPECT_EQ(scores_of(failing.score(requests_for({"7"}))), (std::vector<double>{1.0}));
}

TEST(PythonRewardPool, FilesThatCannotBeUsedAreConfigErrors) {
  struct Case {
    std::string file, function_name, key, python_message;
  };
  const Case cases[] = {
      {"no_such_file.py", "compute_score", "custom_reward_function.path", "No such file or directory"},
      {"syntax_error.py", "compute_score", "custom_reward_function.path", "SyntaxError"},
      {"import_error.py", "compute_score", "custom_reward_function.path",
       "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'"},
      {"exact_match.py", "compute_scores", "custom_reward_function.name", "defines no 'compute_scores'"},
  };
  for (const Case& c : cases) {
    rl::PythonRewardConfig config = config_for(c.file);
    config.function_name = c.function_name;
    const auto [key, message] = config_error_of([&] { rl::PythonRewardFunction function(config); });
    EXPECT_EQ(key, c.key) << c.file;
    EXPECT_TRUE(contains(message, python_file(c.file))) << message;
    EXPECT_TRUE(contains(message, c.python_message)) << message;
  }
  // An import that does not finish is cut off at startup_timeout_s.
  rl::PythonRewardConfig slow = config_for("slow_import.py");
  slow.startup_timeout_s = 0.5;
  const Stopwatch watch;
  const auto [slow_key, slow_message] = config_error_of([&] { rl::PythonRewardFunction function(slow); });
  EXPECT_LT(watch.seconds(), 3.0);
  EXPECT_EQ(slow_key, "custom_reward_function.path");
  EXPECT_TRUE(contains(slow_message, "within 0.5 s")) << slow_message;
  // The missing function's message lists what the file does define.
  rl::PythonRewardConfig config = config_for("exact_match.py");
  config.function_name = "score";
  EXPECT_TRUE(contains(config_error_of([&] { rl::PythonRewardFunction function(config); }).second,
                       "its functions: compute_score"));
}

TEST(PythonRewardPool, ConfigValuesAreChecked) {
  const std::pair<std::string, void (*)(rl::PythonRewardConfig&)> cases[] = {
      {"custom_reward_function.path", [](rl::PythonRewardConfig& c) { c.path.clear(); }},
      {"custom_reward_function.name", [](rl::PythonRewardConfig& c) { c.function_name.clear(); }},
      {"custom_reward_function.reward_kwargs", [](rl::PythonRewardConfig& c) { c.reward_kwargs = {1, 2}; }},
      {"custom_reward_function.num_workers", [](rl::PythonRewardConfig& c) { c.num_workers = 0; }},
      {"custom_reward_function.timeout_s", [](rl::PythonRewardConfig& c) { c.timeout_s = 0; }},
  };
  for (const auto& [key, spoil] : cases) {
    rl::PythonRewardConfig config = config_for("exact_match.py");
    spoil(config);
    EXPECT_EQ(config_error_of([&] { rl::PythonRewardFunction{config}; }).first, key);
  }
}

TEST(PythonRewardPool, ConfigBindsVerlKeysAndOnErrorByName) {
  const auto bound = config::bind<rl::PythonRewardConfig>(
      YAML::Load("{name: score, num_workers: 3, timeout_s: 1.5, on_error: zero}"), "custom_reward_function");
  EXPECT_EQ(bound.function_name, "score");
  EXPECT_EQ(bound.num_workers, 3);
  EXPECT_EQ(bound.timeout_s, 1.5);
  EXPECT_EQ(bound.on_error, rl::FailurePolicy::zero);
  const auto [key, message] = config_error_of(
      [] { config::bind<rl::PythonRewardConfig>(YAML::Load("{on_error: zer0}"), "custom_reward_function"); });
  EXPECT_EQ(key, "custom_reward_function.on_error");
  EXPECT_TRUE(contains(message, "'zero'")) << message;
  EXPECT_EQ(config_error_of([] {
              config::bind<rl::PythonRewardConfig>(YAML::Load("{num_workers: 0}"), "custom_reward_function");
            }).first,
            "custom_reward_function.num_workers");
}

TEST(PythonRewardPool, VerlStyleGsm8kFileAgreesWithTheGsm8kRuleScorer) {
  const std::string long_tail(400, 'x');
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"48 + 24 = 72 clips.\n#### 72", "72"},
      {"Total: 1,234 apples.\n#### 1,234", "1234"},
      {"#### 5\nNo wait.\n#### 72", "72"},
      {"#### 71", "72"},
      {"The answer is 72", "72"},
      {"#### 72" + long_tail, "72"},
      {"It is 72. Done.", "72"},
      {"#### -5", "-5"},
  };
  std::vector<rl::RewardRequest> requests;
  for (const auto& [response, truth] : samples) requests.push_back({"openai/gsm8k", response, truth, nullptr});

  for (const rl::Gsm8kMethod method : {rl::Gsm8kMethod::strict, rl::Gsm8kMethod::flexible}) {
    rl::PythonRewardConfig config = config_for("gsm8k_style.py");
    config.reward_kwargs = {{"method", method == rl::Gsm8kMethod::strict ? "strict" : "flexible"},
                            {"format_score", 0.1}};
    rl::PythonRewardFunction function(config);
    const std::vector<rl::RewardOutcome> outcomes = function.score(requests);
    const rl::Gsm8kScorer rule({.method = method, .format_score = 0.1, .score = 1.0});
    std::vector<double> expected;
    for (const rl::RewardRequest& r : requests)
      expected.push_back(rule.score(r.solution_str, r.ground_truth, nullptr).score);
    EXPECT_EQ(scores_of(outcomes), expected);
    // The samples exercise all three outcomes: right, wrong, no answer.
    for (const double value : {0.0, 0.1, 1.0}) EXPECT_NE(std::ranges::count(expected, value), 0) << value;
  }

  // With verl's defaults it is the rule reward function's openai/gsm8k.
  rl::PythonRewardFunction function(config_for("gsm8k_style.py"));
  rl::RuleRewardFunction rule;
  EXPECT_EQ(scores_of(function.score(requests)), scores_of(rule.score(requests)));
}

}  // namespace
}  // namespace rf::testing
