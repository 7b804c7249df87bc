// MetricsLog: one JSON object per step appended to metrics.jsonl (verl's metric names), and one
// console line per step. A resumed run first drops the rows past the step it resumed from (they
// belong to the interrupted run's lost future) and restores that step's row from its checkpoint when the
// file lacks it (a kill after the commit, before the line), rewriting the file atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace rf::trainer {

class MetricsLog {
 public:
  // `path` empty: no file. `resume_step`: rows with a larger "step" are dropped (every row for 0, a fresh
  // run, whose step-0 validation a killed earlier start may have logged); `resumed_row` (the
  // checkpoint's row of resume_step) is appended when no row of that step is left. `console_keys`: what
  // the console line shows, in that order, when present in a row (empty: every key).
  MetricsLog(std::string path, int64_t resume_step, std::vector<std::string> console_keys = {},
             const std::optional<nlohmann::json>& resumed_row = std::nullopt);
  void write(const nlohmann::json& row, bool to_console);

 private:
  std::string path_;
  std::vector<std::string> console_keys_;
};

}  // namespace rf::trainer
