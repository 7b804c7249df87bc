// DataConfig: the `data:` block of a trainer config (verl's data keys where they exist).
// Either a built-in task (`task` + `task_kwargs`, generated from the seed) or JSONL files.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace rf::data {

struct DataConfig {
  std::string task = "arith";                // built-in task when train_files is null
  YAML::Node task_kwargs;                    // e.g. {digits: 2}
  std::optional<std::vector<std::string>> train_files;  // JSONL: {"prompt": ..., "response": ...}
  std::optional<std::vector<std::string>> val_files;
  int64_t max_length = 32;                   // tokens per example (bos + prompt + response + eos)
  int64_t train_batch_size = 256;            // examples per optimizer step
  int64_t micro_batch_size_per_gpu = 64;     // examples per micro-batch (packed into one row)
  int64_t val_size = 200;                    // held-out examples per evaluation
  uint64_t seed = 1;                         // order of the training stream

  template <class Fields>
  void fields(Fields& f) {
    f("task", task, "built-in task: arith or reversal (used when train_files is null)");
    f("task_kwargs", task_kwargs, "task options, e.g. {digits: 2} for arith");
    f("train_files", train_files, "JSONL training files (null: the built-in task)");
    f("val_files", val_files, "JSONL validation files (null: the task's held-out split)");
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
  }
};

}  // namespace rf::data
