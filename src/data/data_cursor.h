// DataCursor: where the trainer is in its stream of training examples. It is saved in checkpoints, so
// a resumed run consumes exactly the examples the uninterrupted run would have:
//   a task's stream is endless: example i is task.example(Split::train, i) of the task made with
//     `seed`, and the epoch stays 0;
//   a JSONL file's stream visits every row once per epoch, in an order shuffled by (seed, epoch)
//     (an IndexPermutation: computed, not stored), and the epoch advances when next_index reaches
//     the row count.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "data/jsonl_dataset.h"
#include "data/task.h"

namespace rf::data {

struct DataCursor {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t next_index = 0;  // within the epoch

  nlohmann::json to_json() const;  // {"seed", "epoch", "next_index"}
  // IoError naming `source` (the checkpoint file) when a field is missing or not a non-negative integer.
  static DataCursor from_json(const nlohmann::json& json, const std::string& source);
  bool operator==(const DataCursor&) const = default;
};

// The example at `cursor`; advances it.
Example take_example(const Task& task, DataCursor& cursor);
Example take_example(const JsonlDataset& dataset, DataCursor& cursor);

}  // namespace rf::data
