#include "rl/rewards/python_reward_pool.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "rl/rewards/python_reward_worker_source.h"
#include "rl/rewards/worker_process.h"

namespace rf::rl {
namespace {

// How long the destructor lets workers exit after their input is closed: an idle one exits at once.
constexpr std::chrono::seconds kShutdownGrace{1};

std::string key(std::string_view field) { return fmt::format("custom_reward_function.{}", field); }

std::chrono::steady_clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

// Text that is not UTF-8 (a response cut mid-character) goes as U+FFFD, as the tokenizer decodes it.
std::string to_line(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

bool is_positive_seconds(double seconds) { return std::isfinite(seconds) && seconds > 0; }

enum class WorkerState { starting, idle, busy };

}  // namespace

void PythonRewardConfig::validate() const {
  if (function_name.empty())
    throw ConfigError("name", "empty: name the function to call in custom_reward_function.path (verl's default: "
                              "compute_score)");
  if (num_workers < 1) throw ConfigError("num_workers", fmt::format("{}: expected at least 1 worker process", num_workers));
  if (!is_positive_seconds(timeout_s))
    throw ConfigError("timeout_s", fmt::format("{}: expected a positive number of seconds", timeout_s));
  if (!is_positive_seconds(startup_timeout_s))
    throw ConfigError("startup_timeout_s", fmt::format("{}: expected a positive number of seconds", startup_timeout_s));
}

namespace {

// The config's own keys and the two the run fills in (path, reward_kwargs), every error under
// custom_reward_function.
void check_config(const PythonRewardConfig& config) {
  if (config.path.empty()) throw ConfigError(key("path"), "empty: name the .py file that defines the reward function");
  if (!config.reward_kwargs.is_object())
    throw ConfigError(key("reward_kwargs"), fmt::format("expected a mapping of keyword arguments, got {} {}",
                                                        config.reward_kwargs.type_name(), config.reward_kwargs.dump()));
  try {
    config.validate();
  } catch (const ConfigError& error) {
    throw ConfigError(key(error.key_path()), error.detail());
  }
}

}  // namespace

struct PythonRewardFunction::Worker {
  std::unique_ptr<WorkerProcess> process;  // null after an error in score(), until the next score() starts one
  WorkerState state = WorkerState::starting;
  Clock::time_point deadline;  // starting: to have imported the file; busy: to answer
  uint64_t request_id = 0;     // busy: the request it is scoring
  size_t sample = 0;           // busy: that request's index in the batch
};

struct PythonRewardFunction::SampleFailure {
  std::string reason;     // one line
  std::string traceback;  // Python's, when the function raised
};

// One score() call: the requests, their outcomes as they come in, and how far along it is.
struct PythonRewardFunction::Pass {
  std::span<const RewardRequest> requests;
  std::vector<RewardOutcome> outcomes;
  size_t next = 0;  // the first request not handed out yet
  size_t num_done = 0;
  size_t num_failed = 0;
  std::optional<std::pair<size_t, SampleFailure>> first_failure;  // for the on_error=zero warning
};

PythonRewardFunction::PythonRewardFunction(PythonRewardConfig config) : config_(std::move(config)) {
  check_config(config_);
  workers_.resize(size_t(config_.num_workers));
  for (Worker& worker : workers_) start(worker);
  wait_until_started();
}

PythonRewardFunction::~PythonRewardFunction() {
  // All inputs first, so the workers exit side by side and the wait is one grace period, not one each.
  for (Worker& worker : workers_)
    if (worker.process) worker.process->close_input();
  const Clock::time_point deadline = Clock::now() + kShutdownGrace;
  for (Worker& worker : workers_)
    if (worker.process) worker.process->wait_until(deadline);
}

void PythonRewardFunction::start(Worker& worker) {
  // -u: a scorer's print() reaches stderr at once, not lost in a buffer when the worker is killed;
  // -B: importing the user's file writes no __pycache__ beside it.
  worker.process = std::make_unique<WorkerProcess>(
      std::vector<std::string>{config_.python, "-u", "-B", "-c", std::string(python_reward_worker_source())});
  worker.process->queue(to_line({{"path", config_.path},
                                 {"function_name", config_.function_name},
                                 {"reward_kwargs", config_.reward_kwargs}}));
  worker.state = WorkerState::starting;
  worker.deadline = Clock::now() + to_duration(config_.startup_timeout_s);
}

void PythonRewardFunction::replace(Worker& worker, const std::string& why, Pass* pass) {
  const bool was_busy = worker.state == WorkerState::busy;
  const size_t sample = worker.sample;
  worker.process->kill();
  ++num_worker_restarts_;
  start(worker);
  if (was_busy) fail_sample(*pass, sample, {.reason = why});
}

void PythonRewardFunction::wait_until_started() {
  while (std::ranges::any_of(workers_, [](const Worker& w) { return w.state == WorkerState::starting; }))
    poll_workers(nullptr);
}

std::vector<RewardOutcome> PythonRewardFunction::score(std::span<const RewardRequest> requests) {
  Pass pass{.requests = requests, .outcomes = std::vector<RewardOutcome>(requests.size())};
  try {
    for (Worker& worker : workers_)
      if (!worker.process) start(worker);
    while (pass.num_done < requests.size()) {
      for (Worker& worker : workers_)
        if (worker.state == WorkerState::idle && pass.next < requests.size()) dispatch(worker, pass);
      poll_workers(&pass);
    }
  } catch (...) {
    kill_unfinished_workers();
    throw;
  }
  if (pass.first_failure) {
    const auto& [sample, failure] = *pass.first_failure;
    core::log_warning("custom_reward_function {}: {} of {} samples scored 0 (on_error=zero); the first, sample {} "
                      "(data_source '{}'): {}{}{}",
                      config_.path, pass.num_failed, requests.size(), sample, requests[sample].data_source,
                      failure.reason, failure.traceback.empty() ? "" : "\n", failure.traceback);
  }
  return std::move(pass.outcomes);
}

void PythonRewardFunction::dispatch(Worker& worker, Pass& pass) {
  const size_t sample = pass.next++;
  const RewardRequest& request = pass.requests[sample];
  worker.request_id = next_request_id_++;
  worker.sample = sample;
  worker.state = WorkerState::busy;
  worker.deadline = Clock::now() + to_duration(config_.timeout_s);
  worker.process->queue(to_line({{"id", worker.request_id},
                                 {"data_source", request.data_source},
                                 {"solution_str", request.solution_str},
                                 {"ground_truth", request.ground_truth},
                                 {"extra_info", request.extra_info}}));
  // A worker that is gone shows as a failed send or end of stream at the next poll.
  worker.process->send_pending();
}

void PythonRewardFunction::poll_workers(Pass* pass) {
  std::vector<pollfd> fds;
  std::vector<Worker*> polled;
  Clock::time_point nearest = Clock::time_point::max();
  for (Worker& worker : workers_) {
    if (!worker.process) continue;
    const short events = short(POLLIN | (worker.process->has_unsent() ? POLLOUT : 0));
    fds.push_back({.fd = worker.process->fd(), .events = events, .revents = 0});
    polled.push_back(&worker);
    if (worker.state != WorkerState::idle) nearest = std::min(nearest, worker.deadline);
  }
  RF_CHECK(nearest != Clock::time_point::max(), "python reward pool: waiting with no worker starting or scoring");
  const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(nearest - Clock::now()).count();
  const int ready = ::poll(fds.data(), fds.size(), int(std::clamp<int64_t>(wait_ms, 0, INT_MAX)));
  if (ready < 0 && errno != EINTR)
    throw Error(fmt::format("[{}] python reward pool: poll failed: {}", core::rank_label(), std::strerror(errno)));
  for (size_t i = 0; ready > 0 && i < fds.size(); ++i)
    if (fds[i].revents != 0) serve(*polled[i], fds[i].revents, pass);
  handle_timeouts(pass);
}

void PythonRewardFunction::serve(Worker& worker, short revents, Pass* pass) {
  WorkerProcess& process = *worker.process;
  bool alive = true;
  if (revents & POLLOUT) alive = process.send_pending();
  if (revents & (POLLIN | POLLHUP | POLLERR)) alive = process.receive() && alive;
  // Answers that arrived before the end of stream count; handle_line may replace the process.
  while (worker.process.get() == &process) {
    const std::optional<std::string> line = process.take_line();
    if (!line) break;
    handle_line(worker, *line, pass);
  }
  if (alive || worker.process.get() != &process) return;
  const std::string ended = process.kill();
  if (worker.state == WorkerState::starting)
    throw ConfigError(key("path"), fmt::format("{}: the Python worker died while importing it ({}; its stderr is "
                                               "above)",
                                               config_.path, ended));
  replace(worker, fmt::format("its worker process died while scoring it ({}; replaced)", ended), pass);
}

void PythonRewardFunction::handle_line(Worker& worker, const std::string& line, Pass* pass) {
  try {
    const nlohmann::json message = nlohmann::json::parse(line);
    if (worker.state == WorkerState::starting && message.contains("ready")) {
      if (message.at("ready").get<bool>()) {
        worker.state = WorkerState::idle;
        return;
      }
      const std::string error = message.at("error").get<std::string>();
      if (message.at("key").get<std::string>() == "name")
        throw ConfigError(key("name"), fmt::format("'{}' in {}: {}", config_.function_name, config_.path, error));
      throw ConfigError(key("path"), fmt::format("{}: {}", config_.path, error));
    }
    // Read in full before the worker is marked idle: a malformed answer must leave it busy, to be replaced.
    if (worker.state == WorkerState::busy && message.value("id", ~uint64_t(0)) == worker.request_id) {
      if (message.contains("error")) {
        const std::string error = message.at("error").get<std::string>();
        SampleFailure failure{.reason = fmt::format("{} {}", config_.function_name, error),
                              .traceback = message.value("traceback", "")};
        worker.state = WorkerState::idle;
        fail_sample(*pass, worker.sample, std::move(failure));
        return;
      }
      const double value = message.at("score").get<double>();
      std::map<std::string, double> extra = message.at("extra").get<std::map<std::string, double>>();
      worker.state = WorkerState::idle;
      RewardScore& score = pass->outcomes[worker.sample].score;
      score.score = value;
      score.extra = std::move(extra);
      ++pass->num_done;
      return;
    }
  } catch (const nlohmann::json::exception&) {
    // falls through: not the message the worker's protocol sends
  }
  if (worker.state == WorkerState::starting)
    throw ConfigError(key("path"), fmt::format("{}: the Python worker did not start: {:.200}", config_.path, line));
  replace(worker, fmt::format("its worker process sent an unexpected message (replaced): {:.200}", line), pass);
}

void PythonRewardFunction::handle_timeouts(Pass* pass) {
  const Clock::time_point now = Clock::now();
  for (Worker& worker : workers_) {
    if (!worker.process || worker.state == WorkerState::idle || now < worker.deadline) continue;
    if (worker.state == WorkerState::starting)
      throw ConfigError(key("path"), fmt::format("{}: the Python worker did not import it within {} s "
                                                 "(startup_timeout_s)",
                                                 config_.path, config_.startup_timeout_s));
    replace(worker,
            fmt::format("no answer within timeout_s={} s: its worker process was killed (and replaced)",
                        config_.timeout_s),
            pass);
  }
}

void PythonRewardFunction::fail_sample(Pass& pass, size_t sample, SampleFailure failure) {
  const RewardRequest& request = pass.requests[sample];
  if (config_.on_error == FailurePolicy::fail)
    throw Error(fmt::format("[{}] custom_reward_function {} could not score reward sample {} (data_source '{}'): {}; "
                            "custom_reward_function.on_error=fail stops here (on_error=zero would score it 0){}{}",
                            core::rank_label(), config_.path, sample, request.data_source, failure.reason,
                            failure.traceback.empty() ? "" : "\n", failure.traceback));
  pass.outcomes[sample].error = failure.reason;  // its score is still the default: 0, no extras
  ++pass.num_done;
  ++pass.num_failed;
  if (!pass.first_failure) pass.first_failure.emplace(sample, std::move(failure));
}

void PythonRewardFunction::kill_unfinished_workers() {
  // A busy worker's answer belongs to the batch that failed; a starting one may be the one that failed.
  for (Worker& worker : workers_)
    if (worker.process && worker.state != WorkerState::idle) worker.process.reset();
}

}  // namespace rf::rl
