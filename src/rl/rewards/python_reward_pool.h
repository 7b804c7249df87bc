// PythonRewardFunction: a user's verl-style reward file (`custom_reward_function.path`, function
// `custom_reward_function.name`, default `compute_score`), run in a pool of Python worker processes,
// so rlforge itself never links Python and a scorer that hangs or crashes cannot take the rank with it.
//
// As verl's get_custom_reward_fn (verl/trainer/ppo/reward.py), each worker imports the file by path
// (importlib spec_from_file_location, module name `custom_module`) and calls
//   fn(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **reward_kwargs)
// (reward_kwargs win over the four on a clash, as in verl); an `async def` scorer is run to completion.
// The result is a number (anything Python's float() takes other than text: int, bool, float, numpy
// scalars) or a dict holding a numeric `score`; the dict's other numeric values (`acc`, ...) become
// RewardScore::extra, and its values that are not finite numbers (verl's `pred` strings) are dropped,
// where verl would log them: rlforge's metrics hold numbers only.
//
// Failures. At start-up (and whenever a worker is replaced) a file that is missing, does not import
// (syntax error, exception at import) or lacks the function is a ConfigError at
// custom_reward_function.path / .name naming the file and quoting Python's message. While scoring, a
// sample fails when the function raises, returns something that is not a finite number, runs past
// timeout_s (its worker is SIGKILLed with its process group, reaped and replaced) or kills its worker
// (os._exit, a segfault: reaped and replaced). on_error=fail turns the first such failure into an
// rf::Error naming the sample, its data_source, the file and the reason (Python's traceback follows);
// on_error=zero scores the sample 0, says why in RewardOutcome::error, and logs one warning per call.
//
// One request in flight per worker; score() hands out requests in order and polls the workers'
// sockets, so a batch takes about its samples' total time over num_workers (and never less than its
// slowest sample). score() is for one caller at a time.
// The worker's Python source is python_reward_worker_source.cpp; the process and its socket,
// worker_process.h.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rl/rewards/reward_function.h"

namespace rf::rl {

// What a sample that cannot be scored does to the step.
enum class FailurePolicy { fail, zero };
constexpr std::array<std::pair<FailurePolicy, std::string_view>, 2> enum_names(FailurePolicy) {
  return {{{FailurePolicy::fail, "fail"}, {FailurePolicy::zero, "zero"}}};
}

struct PythonRewardConfig {
  std::string path;                                          // custom_reward_function.path
  std::string function_name = "compute_score";               // custom_reward_function.name
  nlohmann::json reward_kwargs = nlohmann::json::object();   // custom_reward_function.reward_kwargs
  int num_workers = 2;                                       // custom_reward_function.num_workers
  double timeout_s = 30;                                     // custom_reward_function.timeout_s, per sample
  FailurePolicy on_error = FailurePolicy::fail;              // custom_reward_function.on_error
  std::string python = "/usr/bin/python3";  // a virtualenv's python3 makes its packages importable
  // How long a worker may take to start and import the file (not a scoring timeout: a reward file may
  // load a tokenizer or a table at import).
  double startup_timeout_s = 60;

  // The keys a user sets in verl's custom_reward_function block (path and reward_kwargs are the run's to
  // fill in: a null path means no Python scorer, and reward_kwargs is free-form YAML there).
  template <class Fields>
  void fields(Fields& f) {
    f("name", function_name, "the function: compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)");
    f("num_workers", num_workers, "rlforge: /usr/bin/python3 worker processes scoring in parallel");
    f("timeout_s", timeout_s, "rlforge: seconds a sample may take; a worker past it is killed and replaced");
    f("on_error", on_error,
      "rlforge: a sample whose scorer raises, times out, crashes or returns a non-number: fail (the step stops "
      "with the error) or zero (scores 0, counted in reward/num_failed)");
  }
  // ConfigError keyed relative to custom_reward_function: an empty name, num_workers < 1, a timeout that
  // is not a positive number. (PythonRewardFunction also refuses an empty path and reward_kwargs that
  // are not an object.)
  void validate() const;
};

class PythonRewardFunction final : public RewardFunction {
 public:
  // Starts config.num_workers workers and waits until each has imported the file: throws the
  // ConfigError above when the file cannot be used.
  explicit PythonRewardFunction(PythonRewardConfig config);
  // Closes every worker's input and gives them a moment to exit, then kills what is left.
  ~PythonRewardFunction() override;
  PythonRewardFunction(const PythonRewardFunction&) = delete;
  PythonRewardFunction& operator=(const PythonRewardFunction&) = delete;

  std::vector<RewardOutcome> score(std::span<const RewardRequest> requests) override;

  const PythonRewardConfig& config() const { return config_; }
  // Workers replaced so far because one timed out or died.
  int64_t num_worker_restarts() const { return num_worker_restarts_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Worker;
  struct Pass;
  struct SampleFailure;

  void start(Worker& worker);
  void replace(Worker& worker, const std::string& why, Pass* pass);
  void wait_until_started();
  // Handles whatever `worker`'s socket has for us; `pass` is null outside score().
  void serve(Worker& worker, short revents, Pass* pass);
  void handle_line(Worker& worker, const std::string& line, Pass* pass);
  void handle_timeouts(Pass* pass);
  void dispatch(Worker& worker, Pass& pass);
  void poll_workers(Pass* pass);
  void fail_sample(Pass& pass, size_t sample, SampleFailure failure);
  // After score() throws: kills the workers that are scoring (their answers have nowhere to go) or
  // starting (one of them may be why it threw); the next score() starts them again.
  void kill_unfinished_workers();

  PythonRewardConfig config_;
  std::vector<Worker> workers_;
  uint64_t next_request_id_ = 0;
  int64_t num_worker_restarts_ = 0;
};

}  // namespace rf::rl
