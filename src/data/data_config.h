// DataConfig: the `data:` block of `rlforge sft` (verl's data keys where they exist).
// Either a built-in task (`task` + `task_kwargs`, generated from the seed) or JSONL files.
// check_data_source is the one reading of the keys that pick the data, shared with `rlforge train`'s data
// block: train_files and val_files are a path or a list (verl's reading), and a built-in task and
// train_files exclude each other.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "config/path_list.h"
#include "core/error.h"

namespace rf::data {

// ConfigError keyed by the data block's own key ("task", "train_files", ...): an empty file list, or a
// built-in task (`task` or `task_kwargs` set) next to train_files.
void check_data_source(const std::optional<std::string>& task, const YAML::Node& task_kwargs,
                       const std::optional<config::PathList>& train_files,
                       const std::optional<config::PathList>& val_files);

struct DataConfig {
  std::optional<std::string> task;           // built-in task when train_files is null (null: arith)
  YAML::Node task_kwargs;                    // e.g. {digits: 2}
  std::optional<config::PathList> train_files;  // JSONL: {"prompt": ..., "response": ...}
  std::optional<config::PathList> val_files;
  int64_t max_length = 32;                   // tokens per example (bos + prompt + response + eos)
  int64_t train_batch_size = 256;            // examples per optimizer step
  int64_t micro_batch_size_per_gpu = 64;     // examples per micro-batch (packed into one row)
  int64_t val_size = 200;                    // held-out examples per evaluation
  uint64_t seed = 1;                         // order of the training stream

  template <class Fields>
  void fields(Fields& f) {
    f("task", task, "built-in task: arith or reversal, when train_files is null (null: arith)");
    f("task_kwargs", task_kwargs, "task options, e.g. {digits: 2} for arith");
    f("train_files", train_files, "JSONL training files, a path or a list, read in order (null: the built-in task)");
    f("val_files", val_files, "JSONL validation files, a path or a list (needed with train_files)");
    f("max_length", max_length, "max tokens of one example (bos + prompt + response + eos)");
    f("train_batch_size", train_batch_size, "examples per optimizer step");
    f("micro_batch_size_per_gpu", micro_batch_size_per_gpu, "examples per micro-batch (packed, no padding)");
    f("val_size", val_size, "held-out examples per evaluation");
    f("seed", seed, "seed of the training data order");
  }
  void validate() const {
    auto positive = [](const char* key, int64_t value) {
      if (value <= 0) throw ConfigError(key, fmt::format("must be positive, got {}", value));
    };
    positive("max_length", max_length);
    positive("train_batch_size", train_batch_size);
    positive("micro_batch_size_per_gpu", micro_batch_size_per_gpu);
    positive("val_size", val_size);
    if (train_batch_size % micro_batch_size_per_gpu != 0)
      throw ConfigError("micro_batch_size_per_gpu", fmt::format("{} does not divide train_batch_size={}",
                                                                micro_batch_size_per_gpu, train_batch_size));
    check_data_source(task, task_kwargs, train_files, val_files);
    if (train_files && !val_files)
      throw ConfigError("val_files", "null, but data.train_files is set: evaluation reads the rows of data.val_files");
  }
  std::string builtin_task() const { return task.value_or("arith"); }
};

}  // namespace rf::data
