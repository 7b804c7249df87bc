// Pipeline schedules as data (Megatron spec §3.5-§3.7): pure functions that build one pipeline stage's
// action list (forward, backward, the p2p exchanges between them, and the gradient-sync and parameter-gather
// points) for no pipelining, 1F1B and interleaved 1F1B. One executor runs any list; the tables are checked
// and simulated without a model (pipeline_schedule_table.h, pipeline_simulator.h).
// Not here: running an action (the executor owns the tensors, the FIFOs and the communicator), config keys.
// Legend: P stages, p a stage, V model chunks per stage (virtual pipeline size), M micro-batches,
// N micro-batches run through one chunk before the next (microbatch_group_size_per_vp_stage).
//
// How an executor reads a list. Actions run one after another on the stage:
// - forward / backward (microbatch, chunk): the chunk's forward or backward on that micro-batch. A forward
//   takes its input from the activation received for (microbatch, chunk) (stage 0 chunk 0 reads data); a
//   backward takes its output gradient from the gradient received for (microbatch, chunk) (the last stage's
//   last chunk starts from the loss). Both inputs are received by an earlier `communicate`.
// - communicate: post every transfer together (irecv/isend, then wait for all of them), as Megatron's
//   `_communicate` / batch_isend_irecv. A stage never waits on half of an exchange, so the combined ops
//   (send_forward_recv_backward, the 4-way one of the interleaved steady state) cannot deadlock against
//   their peers; pipeline_schedule_table.h proves it for every table it is given.
// - param_gather (chunk): launch the chunk's parameter all-gather (distributed optimizer with overlap) now;
//   the forward pre-hook still waits for it. Emitted where Megatron launches it, before the chunk's first
//   forward and aligned across stages.
// - enable_grad_sync (chunk): from here on the chunk's backward launches its gradient-bucket reductions
//   (the overlapped reduction of §4.2), i.e. leave no_sync. Emitted right before the chunk's last backward.
// - launch_grad_sync (chunk): launch whatever of the chunk's reduction is not launched yet (Megatron's
//   grad_sync_func, aligned across stages); a no-op for buckets the backward already launched. Emitted after
//   the chunk's last backward. Forward-only lists have neither grad-sync action.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rf::engine::pipeline {

enum class ActionKind : uint8_t { forward, backward, communicate, param_gather, enable_grad_sync, launch_grad_sync };
enum class TransferDirection : uint8_t { send, recv };
// activation: a forward's output, travels to the next stage (stage P-1 chunk v -> stage 0 chunk v+1).
// grad: a backward's input gradient, travels to the previous stage (stage 0 chunk v -> stage P-1 chunk v-1).
enum class TransferTensor : uint8_t { activation, grad };
enum class PipelinePass : uint8_t { forward_backward, forward_only };

// One tensor of a communicate action. (microbatch, chunk) name it on this stage: for a send, the chunk whose
// forward produced it (activation) or whose backward produced it (grad); for a recv, the chunk that consumes it.
struct Transfer {
  TransferDirection direction = TransferDirection::send;
  TransferTensor tensor = TransferTensor::activation;
  int64_t peer = 0;  // the other stage
  int64_t microbatch = 0;
  int64_t chunk = 0;
  bool operator==(const Transfer&) const = default;
};

struct PipelineAction {
  ActionKind kind = ActionKind::forward;
  int64_t microbatch = -1;  // forward / backward only
  int64_t chunk = -1;       // every kind but communicate
  std::vector<Transfer> transfers;  // communicate only: posted together, 1 to 4 of them
  bool operator==(const PipelineAction&) const = default;
};

using StageActions = std::vector<PipelineAction>;

// The shape every stage's list is built from.
struct ScheduleShape {
  int64_t num_stages = 1;          // P
  int64_t num_chunks = 1;          // V
  int64_t num_microbatches = 1;    // M
  int64_t microbatch_group_size = 0;  // N; only for V > 1, 0 = P (Megatron's default)
  PipelinePass pass = PipelinePass::forward_backward;

  // ConfigError naming the key: sizes positive, V > 1 only with P > 1, and for V > 1 Megatron's
  // P <= N <= M and (M % N == 0 or M % N >= P).
  void validate() const;
  // N with the default applied.
  int64_t group_size() const { return microbatch_group_size > 0 ? microbatch_group_size : num_stages; }
};

// Every stage's list, stage p at index p.
struct PipelineSchedule {
  ScheduleShape shape;
  std::vector<StageActions> stages;
};

// §3.5, P == 1: forward then backward of each micro-batch; grad sync enabled for the last one.
StageActions make_no_pipelining_schedule(int64_t num_microbatches, PipelinePass pass);

// §3.6: stage p's warmup min(P-p-1, M) forwards, steady 1F1B with combined exchanges, cooldown backwards.
StageActions make_1f1b_schedule(int64_t num_stages, int64_t stage, int64_t num_microbatches, PipelinePass pass);

// §3.7: V chunks per stage, N micro-batches per chunk group (0 = P). Warmup min(2(P-p-1) + (V-1)N, M·V).
// Throws ConfigError on `microbatch_group_size_per_vp_stage` unless P <= N <= M and (M % N == 0 or
// M % N >= P), and on `virtual_pipeline_model_parallel_size` unless P >= 2 and V >= 2.
StageActions make_interleaved_1f1b_schedule(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                            int64_t num_microbatches, int64_t microbatch_group_size,
                                            PipelinePass pass);

// Megatron's choice of schedule: no pipelining for P == 1, 1F1B for V == 1, interleaved otherwise; every
// stage's list. Validates the shape (ConfigError naming the key).
PipelineSchedule make_pipeline_schedule(const ScheduleShape& shape);

// The §3.7 virtual-id table: virtual step k -> (microbatch, forward chunk). Groups of N micro-batches run
// chunk 0, then chunk 1, ..., chunk V-1; the last group may be shorter. P=2, M=5, N=3, V=2 gives
// mb 0 1 2 0 1 2 3 4 3 4 and chunk 0 0 0 1 1 1 0 0 1 1.
struct VirtualStep {
  int64_t microbatch = 0;
  int64_t chunk = 0;
  bool operator==(const VirtualStep&) const = default;
};
std::vector<VirtualStep> make_virtual_step_table(int64_t num_microbatches, int64_t num_chunks,
                                                 int64_t microbatch_group_size);

// Forwards a stage runs before its first backward (the in-flight activations it holds are this + 1 at most):
// §3.6 min(P-p-1, M) for V == 1, §3.7 min(2(P-p-1) + (V-1)N, M·V) for V > 1, M·V when forward-only.
int64_t num_warmup_steps(const ScheduleShape& shape, int64_t stage);

// The ring: activations go to next, grads to prev.
inline int64_t next_stage(int64_t stage, int64_t num_stages) { return (stage + 1) % num_stages; }
inline int64_t prev_stage(int64_t stage, int64_t num_stages) { return (stage + num_stages - 1) % num_stages; }

// "F3.1" (forward mb 3 chunk 1), "B0.0", ">a3.1+<g0.0" (send activation mb 3 chunk 1, receive grad mb 0
// chunk 0, posted together), "ag1" (param all-gather chunk 1), "es0" (enable grad sync chunk 0),
// "rs0" (launch grad reduction chunk 0).
std::string action_label(const PipelineAction& action);

}  // namespace rf::engine::pipeline
