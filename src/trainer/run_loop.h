// The loop every trainer runs, `rlforge sft`'s and `rlforge train`'s: resume, a validation before training,
// the steps with their validations and checkpoints every test_freq / save_freq steps and at the last one, a
// stop when a time budget runs out or a validation says so, one metrics row per step (metrics.jsonl and a
// console line: MetricsLog) with the whole step's time (timing_s/step, timing_s/testing,
// timing_s/save_checkpoint) and the memory peaks by tier and category, and the plot at the end. What a
// step, a validation and a checkpoint are is the trainer's (Trainable).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_tracker.h"
#include "trainer/metrics_plot.h"

namespace rf::checkpoint {
class CheckpointReader;
class CheckpointWriter;
}  // namespace rf::checkpoint

namespace rf::trainer {

using Metrics = std::map<std::string, double>;

struct Validation {
  Metrics metrics;
  double score = 0;   // the number the run summary reports (accuracy, mean reward)
  bool stop = false;  // end the run after this step (with its checkpoint)
};

// Where a run continues: after `step` (0: a fresh run), with the metrics row that step's checkpoint holds
// (null for a fresh run, or a checkpoint saved without one).
struct Resumed {
  int64_t step = 0;
  std::optional<nlohmann::json> metrics_row;
};

class Trainable {
 public:
  virtual ~Trainable() = default;
  // Loads what the trainer's resume mode names (RunFolder::resume_point).
  virtual Resumed resume() = 0;
  virtual Metrics step(int64_t step) = 0;
  virtual Validation validate(int64_t step) = 0;
  // Saves the step with its metrics row as it stands before the save (resume() gives it back), so the row
  // is durable together with its checkpoint: a kill between the checkpoint's commit and the row's line in
  // metrics.jsonl loses nothing.
  virtual void save_checkpoint(int64_t step, const nlohmann::json& metrics_row) = 0;
  // The metrics of a whole step, once its validation and checkpoint ran in `seconds` (verl's throughput).
  virtual void finish_step(Metrics& /*metrics*/, int64_t /*step*/, double /*seconds*/) {}
};

struct LoopSchedule {
  int64_t total_steps = 0;
  int64_t test_freq = -1;             // <= 0: no periodic validation
  int64_t save_freq = -1;             // <= 0: no checkpoints
  bool validate_before_training = false;  // at step 0 of a fresh run (needs test_freq > 0)
  bool validate_at_end = false;       // at the last step even when test_freq <= 0
  std::optional<double> time_budget_s;  // stop, validated and saved, once a step ends past it
};

struct LoopOutput {
  std::string run_dir;  // metrics.jsonl and metrics.svg go here
  bool console = true, jsonl = true;
  bool lead = true;  // world rank 0: the one that writes and prints
  std::vector<std::string> console_keys;  // empty: every key
  std::vector<PlotPanel> plot;
};

struct LoopSummary {
  int64_t steps_run = 0;
  int64_t final_step = 0;
  double seconds = 0;
  double first_score = -1;  // of the first validation (the one before training when it runs)
  double final_score = -1;  // of the last
};

// A step's metrics row in its checkpoint (trainer/metrics_row.json), written by the lead rank, and read
// back on resume (nullopt for a step saved without one).
void add_metrics_row(checkpoint::CheckpointWriter& writer, const nlohmann::json& row);
std::optional<nlohmann::json> read_metrics_row(const checkpoint::CheckpointReader& reader);

// Collective over the trainer's ranks as its methods are.
LoopSummary run_loop(Trainable& trainer, const LoopSchedule& schedule, const LoopOutput& output,
                     const MemoryTracker& tracker);

// The run's peak memory by tier, and by tier and category (perf/max_memory_<tier>[_<category>]_bytes).
void add_memory_metrics(Metrics& metrics, const MemoryTracker& tracker);

}  // namespace rf::trainer
