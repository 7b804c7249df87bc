// Replays a pipeline schedule's action tables (pipeline_schedule.h) on paper: given how long each chunk's
// forward and backward take on each stage and what a p2p transfer costs, when does every action start and
// end, how long is the step, how much of it is bubble, and how many activations does each stage hold at most.
// The same replay proves a table deadlock-free (pipeline_schedule_table.h runs it with unit times).
// Not here: contention (a stage's transfers run concurrently, full duplex, and overlap nothing), gradient
// or parameter collectives (the sync markers take no time), measuring the times (the executor's job).
//
// Semantics, as the executor runs a list (Megatron's _communicate without overlap): actions on a stage run
// one after another; a communicate posts all its transfers at once and ends when all of them have ended;
// a transfer starts when both sides have posted it (the k-th send on a channel, sender -> receiver and
// tensor kind, pairs with the k-th receive) and takes latency + bytes / bandwidth.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "engine/pipeline/pipeline_schedule.h"

namespace rf::engine::pipeline {

struct PipelineCosts {
  // [stage][chunk], seconds for one micro-batch.
  std::vector<std::vector<double>> forward_seconds;
  std::vector<std::vector<double>> backward_seconds;
  // [stage][chunk], bytes one micro-batch-chunk keeps from its forward until its backward; empty = not counted.
  std::vector<std::vector<int64_t>> activation_bytes;
  // One transfer (an activation or a gradient of one micro-batch): latency + message_bytes / bandwidth.
  double p2p_latency_seconds = 0.0;
  double p2p_bytes_per_second = std::numeric_limits<double>::infinity();
  int64_t p2p_message_bytes = 0;

  double transfer_seconds() const;
};

// The same forward and backward time for every chunk on every stage, free p2p.
PipelineCosts uniform_costs(int64_t num_stages, int64_t num_chunks, double forward_seconds, double backward_seconds);

struct ActionTiming {
  double start = 0.0;  // a communicate: when it was posted
  double end = 0.0;
};

struct StageReport {
  double busy_seconds = 0.0;  // forward + backward compute
  double idle_seconds = 0.0;  // step_seconds - busy_seconds: waiting on peers and transfers
  double end_seconds = 0.0;   // when the stage's last action ends
  int64_t peak_in_flight = 0;  // micro-batch-chunks forwarded and not yet backwarded (0 when forward-only)
  int64_t peak_activation_bytes = 0;  // the same, weighted by PipelineCosts::activation_bytes
};

struct SimulationReport {
  double step_seconds = 0.0;  // the last stage to finish
  // Megatron's bubble (Narayanan et al. 2021, §2.2): time beyond the ideal compute, relative to it.
  // The ideal is the busiest stage's compute (every stage's, with uniform times), so
  // bubble = (step_seconds - max_p busy_p) / max_p busy_p; 1F1B gives (P-1)/M with uniform times.
  double bubble_fraction = 0.0;
  std::vector<StageReport> stages;
  std::vector<std::vector<ActionTiming>> timings;  // [stage][action], parallel to the schedule's lists
};

// Throws rf::Error naming each stuck stage and the action it waits in when the tables deadlock, and when a
// stage's list does not fit the shape (a chunk or peer out of range).
SimulationReport simulate_pipeline(const PipelineSchedule& schedule, const PipelineCosts& costs);

}  // namespace rf::engine::pipeline
