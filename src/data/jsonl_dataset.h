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

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/task.h"

namespace rf::data {

// Every row of the JSON Lines file at `path`, parsed, with its 1-based line number; blank lines skipped.
// IoError naming the file for one it cannot open or read ("cannot open (<what>)" when `what` is given) and
// for a line that is not JSON (its number). Whatever `row` throws propagates.
void for_each_jsonl_row(const std::string& path, const std::string& what,
                        const std::function<void(const nlohmann::json& row, int64_t line)>& row);

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
