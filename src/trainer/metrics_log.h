// MetricsLog: one JSON object per step appended to metrics.jsonl (verl's metric names), and one
// console line per step. A resumed run first drops the rows past the step it resumed from (they
// belong to the interrupted run's lost future), rewriting the file atomically.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rf::trainer {

class MetricsLog {
 public:
  // `path` empty: no file. `resume_step`: rows with a larger "step" are dropped. `console_keys`:
  // what the console line shows, in that order, when present in a row (empty: every key).
  MetricsLog(std::string path, int64_t resume_step, std::vector<std::string> console_keys = {});
  void write(const nlohmann::json& row, bool to_console);

 private:
  std::string path_;
  std::vector<std::string> console_keys_;
};

}  // namespace rf::trainer
