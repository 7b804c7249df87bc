// JsonlDataset: examples read from a JSON Lines file, one object per line, held in memory. Two row
// layouts are accepted:
//   SFT:       {"prompt": "...", "response": "..."}                      ground truth = response
//   verl's RL: {"prompt": "...", "data_source": "...", "reward_model": {"ground_truth": ...},
//               "extra_info": {...}}                                       response empty
// (a row may carry both a response and a reward_model.ground_truth; other columns are ignored). Blank
// lines are skipped. Every problem is an IoError naming the file and the line number. Not here:
// chat-formatted prompts (a list of {"role", "content"} messages: the SFT trainer does not render chat
// templates yet, so such a prompt is given as the template's text); parquet files.
#pragma once

#include <string>
#include <vector>

#include "data/task.h"

namespace rf::data {

class JsonlDataset {
 public:
  explicit JsonlDataset(std::string path);

  const std::string& path() const { return path_; }
  size_t size() const { return examples_.size(); }
  const Example& example(size_t index) const;

 private:
  std::string path_;
  std::vector<Example> examples_;
};

}  // namespace rf::data
