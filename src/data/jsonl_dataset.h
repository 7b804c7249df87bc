// JsonlDataset: examples read from JSON Lines files, one object per line, held in memory. Two row
// layouts are accepted:
//   SFT:       {"prompt": "...", "response": "..."}                      ground truth = response
//   verl's RL: {"prompt": "...", "data_source": "...", "reward_model": {"ground_truth": ...},
//               "extra_info": {...}}                                       response empty
// (a row may carry both a response and a reward_model.ground_truth; other columns are ignored). Blank
// lines are skipped. Every problem is an IoError naming the file and the line number. Not here:
// chat-formatted prompts (a list of {"role", "content"} messages: the SFT trainer does not render chat
// templates yet, so such a prompt is given as the template's text); parquet files.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/task.h"

namespace rf::data {

// One row: long documents are megabytes; a line past this is not a row (a file without newlines, a device).
inline constexpr uint64_t kMaxJsonlLineBytes = uint64_t(64) << 20;

using JsonlRowFn = std::function<void(const nlohmann::json& row, int64_t line)>;

// Every row of the JSON Lines file at `path`, parsed, with its 1-based line number; blank lines skipped.
// IoError naming the file for one it cannot open or read ("(named by <what>)" when `what` is given),
// that is not a file (a device; a pipe is read), and for a line that is not JSON or is longer than
// kMaxJsonlLineBytes (its number). Whatever `row` throws propagates.
void for_each_jsonl_row(const std::string& path, const std::string& what, const JsonlRowFn& row);
// The same over a stream; `path` names it in errors.
void for_each_jsonl_row(std::istream& in, const std::string& path, const JsonlRowFn& row);

// One row as an Example (the two layouts above); IoError naming `path` and `line` when it is neither.
Example example_from_jsonl_row(const nlohmann::json& row, const std::string& path, int64_t line);

// The rows of one or more files, one after another in the order given (verl concatenates its files).
class JsonlDataset {
 public:
  explicit JsonlDataset(std::string path) : JsonlDataset(std::vector<std::string>{std::move(path)}) {}
  explicit JsonlDataset(std::vector<std::string> paths);

  // The file names, joined by ", " (what an error about the rows names).
  const std::string& path() const { return path_; }
  size_t size() const { return examples_.size(); }
  const Example& example(size_t index) const;

 private:
  std::string path_;
  std::vector<Example> examples_;
};

}  // namespace rf::data
