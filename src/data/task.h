// Built-in tasks: seeded generators of (prompt, response, ground truth) that need no files, and their
// scorers. An example is a pure function of (seed, split, index) through Philox, so resuming at a data
// position regenerates the same stream, and held-out (val) problems are kept out of train by
// construction, not by filtering a sample. The tasks themselves are in builtin_tasks.h; datasets read
// from files are in jsonl_dataset.h.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace rf::data {

enum class Split : uint8_t { train, val };

struct Example {
  std::string prompt;
  std::string response;      // the SFT target; empty for RL rows that only carry a ground truth
  std::string ground_truth;  // what score() compares a generated response with
};

struct TaskScore {
  double acc = 0.0;  // 1 or 0
};

class Task {
 public:
  virtual ~Task() = default;

  virtual std::string_view name() const = 0;
  // Train indices are unbounded; val indices run over [0, num_val_examples()), each a distinct
  // held-out problem. Val problems do not depend on the seed, so every run is evaluated on the same set.
  virtual Example example(Split split, uint64_t index) const = 0;
  virtual uint64_t num_val_examples() const = 0;
  virtual TaskScore score(const std::string& response, const std::string& ground_truth) const = 0;
};

// `name` is `data.task`, `kwargs` is `data.task_kwargs` (an object, or null for the defaults).
// ConfigError naming `data.task` for an unknown task and `data.task_kwargs.<key>` for an unknown key
// or a bad value.
std::unique_ptr<Task> make_task(const std::string& name, const nlohmann::json& kwargs, uint64_t seed);
// The characters a task's prompts and responses use (CharTokenizer::for_task's alphabet).
std::string task_alphabet(const std::string& name);

// acc 1 when `response` equals `ground_truth` after trimming surrounding whitespace from both, else 0.
TaskScore exact_match_score(std::string_view response, std::string_view ground_truth);

}  // namespace rf::data
