// The one executor of pipeline schedules (pipeline_schedule.h): runs a stage's action list, doing the p2p
// transfers itself and asking its caller (the engine) for every forward, backward and gradient-sync action.
// The same executor runs every list: no pipelining (P = 1: no transfers), 1F1B and interleaved 1F1B.
//
// Transfers (Megatron §3.3): a communicate action posts every receive, then every send, non-blocking, and
// waits for all of them, so a combined exchange (send_forward_recv_backward, the interleaved 4-way one) cannot
// deadlock against its peer; pipeline_schedule_table.h proves the tables pair up. A stage's peers are ranks of
// the pipeline group in stage order. Each tensor is a micro-batch's rows of the residual stream, [rows, C]
// (this rank's N / TP with sequence parallel, else N): every stage holds the step's micro-batches (the engine
// hands each rank the same data), so each knows the shape of what it receives without an exchange; variable
// lengths across packed micro-batches need nothing more. What a forward or backward returns to send is copied
// at once into a buffer of its own, freed when the send completes (Megatron's deallocate_pipeline_outputs):
// the chunk's activation slot and scratch are free for the next action; a received tensor is freed once the
// action that consumes it returns.
// Not here: what a forward or backward does (the engine's StageWork), the schedule itself, config keys.
#pragma once

#include <functional>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "engine/pipeline/pipeline_schedule.h"

namespace rf::engine::pipeline {

struct StageWork {
  // Chunk `chunk`'s forward of `microbatch`; `input` is the activation received for it, empty for the first
  // virtual stage (it reads the data). Returns the activation the next virtual stage takes (empty for the
  // last virtual stage); read before the next action runs.
  std::function<TensorView(int64_t microbatch, int64_t chunk, TensorView input)> forward;
  // Its backward; `output_grad` is the gradient received for the chunk's output, empty for the last virtual
  // stage (it starts from the loss). Returns the gradient of the chunk's input for the previous virtual stage
  // (empty for the first); read before the next action runs.
  std::function<TensorView(int64_t microbatch, int64_t chunk, TensorView output_grad)> backward;
  // The shape and dtype of a transferred tensor of `microbatch` (activations and their gradients alike).
  std::function<Shape(int64_t microbatch)> transfer_shape;
  DType transfer_dtype = DType::f32;
  // The grad-sync and param-gather points (pipeline_schedule.h); unset: nothing to do.
  std::function<void(int64_t chunk)> enable_grad_sync, launch_grad_sync, param_gather;
};

// Runs `actions`, stage `pipeline.rank()`'s list, to the end. Every stage of the
// pipeline runs its own list at the same time (collective over `pipeline`). Transfer buffers are accounted to
// `account`. An action whose input never arrived, or a transfer left over at the end, is an Error naming the
// stage and the action (a table that does not pair up, which the table checker rules out).
void run_stage_actions(const StageActions& actions, dist::ProcessGroup& pipeline, const StageWork& work,
                       TensorAccount account);

}  // namespace rf::engine::pipeline
