#include "trainer/run_loop.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/log.h"
#include "core/stopwatch.h"
#include "trainer/metrics_log.h"

namespace rf::trainer {
namespace {

nlohmann::json metrics_row(int64_t step, const Metrics& metrics) {
  nlohmann::json row = {{"step", step}};
  for (const auto& [name, value] : metrics) row[name] = value;
  return row;
}

}  // namespace

void add_metrics_row(checkpoint::CheckpointWriter& writer, const nlohmann::json& row) {
  writer.add_json("trainer", "metrics_row", row);
}

std::optional<nlohmann::json> read_metrics_row(const checkpoint::CheckpointReader& reader) {
  if (!reader.has_json("trainer", "metrics_row")) return std::nullopt;
  return reader.read_json("trainer", "metrics_row");
}

void add_memory_metrics(Metrics& metrics, const MemoryTracker& tracker) {
  for (int t = 0; t < kNumMemoryTiers; ++t) {
    const auto tier = MemoryTier(t);
    if (tracker.peak(tier) == 0) continue;
    metrics[fmt::format("perf/max_memory_{}_bytes", memory_tier_name(tier))] = double(tracker.peak(tier));
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = MemoryCategory(c);
      if (tracker.peak(tier, category) > 0)
        metrics[fmt::format("perf/max_memory_{}_{}_bytes", memory_tier_name(tier), memory_category_name(category))] =
            double(tracker.peak(tier, category));
    }
  }
}

LoopSummary run_loop(Trainable& trainer, const LoopSchedule& schedule, const LoopOutput& output,
                     const MemoryTracker& tracker) {
  const Resumed resumed = trainer.resume();
  const int64_t start_step = resumed.step;
  const std::string metrics_path = output.run_dir + "/metrics.jsonl";
  MetricsLog metrics_log(output.jsonl && output.lead ? metrics_path : std::string(), start_step, output.console_keys,
                         resumed.metrics_row);
  const bool console = output.console && output.lead;
  LoopSummary summary;
  summary.final_step = start_step;
  const auto record = [&](const Validation& v) {
    summary.final_score = v.score;
    if (summary.first_score < 0) summary.first_score = v.score;
  };
  if (schedule.validate_before_training && start_step == 0 && schedule.test_freq > 0) {
    const Validation v = trainer.validate(0);
    record(v);
    metrics_log.write(metrics_row(0, v.metrics), console);
  }
  Stopwatch run_clock;
  for (int64_t step = start_step + 1; step <= schedule.total_steps; ++step) {
    Stopwatch step_clock;
    Metrics m = trainer.step(step);
    const auto timed = [&](const std::string& stage, const auto& fn) {
      Stopwatch clock;
      fn();
      m["timing_s/" + stage] = clock.seconds();
    };
    const bool out_of_time = schedule.time_budget_s && run_clock.seconds() >= *schedule.time_budget_s;
    bool last = step == schedule.total_steps || out_of_time;
    const bool periodic = schedule.test_freq > 0 && step % schedule.test_freq == 0;
    if (periodic || (last && (schedule.test_freq > 0 || schedule.validate_at_end)))
      timed("testing", [&] {
        const Validation v = trainer.validate(step);
        m.insert(v.metrics.begin(), v.metrics.end());
        record(v);
        last = last || v.stop;
      });
    // The row as it stands before the save goes into the checkpoint; the row logged below adds the save.
    const auto complete = [&](Metrics& row) {
      const double seconds = step_clock.seconds();
      row["timing_s/step"] = seconds;
      trainer.finish_step(row, step, seconds);
      add_memory_metrics(row, tracker);
    };
    if (schedule.save_freq > 0 && (last || step % schedule.save_freq == 0)) {
      Metrics before_save = m;
      complete(before_save);
      timed("save_checkpoint", [&] { trainer.save_checkpoint(step, metrics_row(step, before_save)); });
    }
    complete(m);
    metrics_log.write(metrics_row(step, m), console);
    summary.final_step = step;
    ++summary.steps_run;
    if (out_of_time && output.lead)
      core::log_info("trainer.time_budget_s {} reached after step {}", *schedule.time_budget_s, step);
    if (last) break;
  }
  summary.seconds = run_clock.seconds();
  if (output.lead && output.jsonl) write_metrics_plot(metrics_path, output.run_dir + "/metrics.svg", output.plot);
  return summary;
}

}  // namespace rf::trainer
