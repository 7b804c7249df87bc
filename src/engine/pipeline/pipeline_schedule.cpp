#include "engine/pipeline/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace rf::engine::pipeline {
namespace {

// Appends one stage's actions; a communicate with no transfer (stage 0 has nothing to receive
// activations from, the last stage nothing to send them to) is not emitted.
class StageListBuilder {
 public:
  StageListBuilder(int64_t num_stages, int64_t stage) : num_stages_(num_stages), stage_(stage) {}

  void compute(ActionKind kind, int64_t microbatch, int64_t chunk) {
    actions_.push_back(PipelineAction{.kind = kind, .microbatch = microbatch, .chunk = chunk, .transfers = {}});
  }
  void marker(ActionKind kind, int64_t chunk) {
    actions_.push_back(PipelineAction{.kind = kind, .microbatch = -1, .chunk = chunk, .transfers = {}});
  }
  // Transfers collected by the calls below go into one communicate action at flush().
  void send_activation(int64_t microbatch, int64_t chunk) {
    pending_.push_back(Transfer{TransferDirection::send, TransferTensor::activation, next_stage(stage_, num_stages_),
                                microbatch, chunk});
  }
  void recv_activation(int64_t microbatch, int64_t chunk) {
    pending_.push_back(Transfer{TransferDirection::recv, TransferTensor::activation, prev_stage(stage_, num_stages_),
                                microbatch, chunk});
  }
  void send_grad(int64_t microbatch, int64_t chunk) {
    pending_.push_back(
        Transfer{TransferDirection::send, TransferTensor::grad, prev_stage(stage_, num_stages_), microbatch, chunk});
  }
  void recv_grad(int64_t microbatch, int64_t chunk) {
    pending_.push_back(
        Transfer{TransferDirection::recv, TransferTensor::grad, next_stage(stage_, num_stages_), microbatch, chunk});
  }
  void flush() {
    if (!pending_.empty()) {
      actions_.push_back(PipelineAction{.kind = ActionKind::communicate, .microbatch = -1, .chunk = -1,
                                        .transfers = std::move(pending_)});
    }
    pending_.clear();
  }
  StageActions take() {
    flush();
    return std::move(actions_);
  }

 private:
  int64_t num_stages_;
  int64_t stage_;
  StageActions actions_;
  std::vector<Transfer> pending_;
};

void check_positive(int64_t value, const char* key) {
  if (value < 1) throw ConfigError(key, fmt::format("must be at least 1, got {}", value));
}

void check_stage(int64_t num_stages, int64_t stage) {
  check_positive(num_stages, "pipeline_model_parallel_size");
  RF_CHECK(stage >= 0 && stage < num_stages, "pipeline stage {} is outside [0, {})", stage, num_stages);
}

}  // namespace

void ScheduleShape::validate() const {
  check_positive(num_stages, "pipeline_model_parallel_size");
  check_positive(num_chunks, "virtual_pipeline_model_parallel_size");
  check_positive(num_microbatches, "num_microbatches");
  if (num_chunks == 1) return;  // N is only read by the interleaved schedule
  if (num_stages < 2) {
    throw ConfigError("virtual_pipeline_model_parallel_size",
                      fmt::format("{} model chunks per stage need pipeline_model_parallel_size >= 2, got {}",
                                  num_chunks, num_stages));
  }
  const int64_t n = group_size();
  if (n < num_stages || n > num_microbatches) {
    throw ConfigError("microbatch_group_size_per_vp_stage",
                      fmt::format("{} must lie in [pipeline_model_parallel_size = {}, num_microbatches = {}]", n,
                                  num_stages, num_microbatches));
  }
  const int64_t last_group = num_microbatches % n;
  if (last_group != 0 && last_group < num_stages) {
    throw ConfigError("microbatch_group_size_per_vp_stage",
                      fmt::format("num_microbatches = {} leaves a last group of {} micro-batches, fewer than "
                                  "pipeline_model_parallel_size = {} (a dependency bubble); M % N must be 0 or >= P",
                                  num_microbatches, last_group, num_stages));
  }
}

std::vector<VirtualStep> make_virtual_step_table(int64_t num_microbatches, int64_t num_chunks,
                                                 int64_t microbatch_group_size) {
  RF_CHECK(num_microbatches > 0 && num_chunks > 0 && microbatch_group_size > 0,
           "virtual step table of M={}, V={}, N={}", num_microbatches, num_chunks, microbatch_group_size);
  std::vector<VirtualStep> table;
  table.reserve(size_t(num_microbatches * num_chunks));
  for (int64_t first = 0; first < num_microbatches; first += microbatch_group_size) {
    const int64_t end = std::min(first + microbatch_group_size, num_microbatches);
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
      for (int64_t mb = first; mb < end; ++mb) table.push_back(VirtualStep{mb, chunk});
    }
  }
  return table;
}

int64_t num_warmup_steps(const ScheduleShape& shape, int64_t stage) {
  const int64_t total = shape.num_microbatches * shape.num_chunks;
  if (shape.pass == PipelinePass::forward_only) return total;
  if (shape.num_stages == 1) return 0;
  const int64_t remaining_stages = shape.num_stages - stage - 1;
  if (shape.num_chunks == 1) return std::min(remaining_stages, shape.num_microbatches);
  return std::min(2 * remaining_stages + (shape.num_chunks - 1) * shape.group_size(), total);
}

StageActions make_no_pipelining_schedule(int64_t num_microbatches, PipelinePass pass) {
  check_positive(num_microbatches, "num_microbatches");
  StageListBuilder b(1, 0);
  b.marker(ActionKind::param_gather, 0);
  for (int64_t mb = 0; mb < num_microbatches; ++mb) {
    // Megatron runs micro-batches 0..M-2 inside no_sync and the last outside it, so the reduction
    // overlaps the last backward.
    if (pass == PipelinePass::forward_backward && mb == num_microbatches - 1) b.marker(ActionKind::enable_grad_sync, 0);
    b.compute(ActionKind::forward, mb, 0);
    if (pass == PipelinePass::forward_backward) b.compute(ActionKind::backward, mb, 0);
  }
  if (pass == PipelinePass::forward_backward) b.marker(ActionKind::launch_grad_sync, 0);
  return b.take();
}

StageActions make_1f1b_schedule(int64_t num_stages, int64_t stage, int64_t num_microbatches, PipelinePass pass) {
  check_stage(num_stages, stage);
  check_positive(num_microbatches, "num_microbatches");
  const int64_t m = num_microbatches;
  const bool first = stage == 0;
  const bool last = stage == num_stages - 1;
  const bool train = pass == PipelinePass::forward_backward;
  // Forward-only runs every micro-batch as a warmup step (the same recv, forward, send sequence Megatron's
  // steady loop issues when forward_only).
  const int64_t warmup = train ? std::min(num_stages - stage - 1, m) : m;
  const int64_t steady = m - warmup;

  StageListBuilder b(num_stages, stage);
  b.marker(ActionKind::param_gather, 0);
  for (int64_t mb = 0; mb < warmup; ++mb) {
    if (!first) b.recv_activation(mb, 0);
    b.flush();
    b.compute(ActionKind::forward, mb, 0);
    if (!last) b.send_activation(mb, 0);
    b.flush();
  }
  if (steady > 0 && !first) b.recv_activation(warmup, 0);
  b.flush();
  for (int64_t i = 0; i < steady; ++i) {
    const int64_t fwd_mb = warmup + i;
    const bool last_iteration = i == steady - 1;
    b.compute(ActionKind::forward, fwd_mb, 0);
    if (!last) {  // send_forward_recv_backward
      b.send_activation(fwd_mb, 0);
      b.recv_grad(i, 0);
    }
    b.flush();
    if (warmup == 0 && last_iteration) b.marker(ActionKind::enable_grad_sync, 0);
    b.compute(ActionKind::backward, i, 0);
    if (!first) {  // send_backward_recv_forward, or send_backward after the last forward
      b.send_grad(i, 0);
      if (!last_iteration) b.recv_activation(fwd_mb + 1, 0);
    }
    b.flush();
  }
  if (train) {
    for (int64_t i = 0; i < warmup; ++i) {
      const int64_t mb = steady + i;
      if (i == warmup - 1) b.marker(ActionKind::enable_grad_sync, 0);
      if (!last) b.recv_grad(mb, 0);
      b.flush();
      b.compute(ActionKind::backward, mb, 0);
      if (!first) b.send_grad(mb, 0);
      b.flush();
    }
    b.marker(ActionKind::launch_grad_sync, 0);
  }
  return b.take();
}

StageActions make_interleaved_1f1b_schedule(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                            int64_t num_microbatches, int64_t microbatch_group_size,
                                            PipelinePass pass) {
  const ScheduleShape shape{num_stages, num_chunks, num_microbatches, microbatch_group_size, pass};
  shape.validate();
  check_stage(num_stages, stage);
  if (num_chunks < 2) {
    throw ConfigError("virtual_pipeline_model_parallel_size",
                      fmt::format("the interleaved schedule needs at least 2 model chunks per stage, got {} "
                                  "(use the 1F1B schedule)",
                                  num_chunks));
  }
  const int64_t p_size = num_stages;
  const int64_t v_size = num_chunks;
  const int64_t m = num_microbatches;
  const int64_t total = m * v_size;
  const bool first = stage == 0;
  const bool last = stage == p_size - 1;
  const bool train = pass == PipelinePass::forward_backward;
  const std::vector<VirtualStep> table = make_virtual_step_table(m, v_size, shape.group_size());
  const int64_t warmup = num_warmup_steps(shape, stage);
  const bool all_warmup = warmup == total;
  const int64_t remaining = total - warmup;

  auto forward_chunk = [&](int64_t k) { return table[size_t(k % total)].chunk; };
  auto backward_chunk = [&](int64_t k) { return v_size - 1 - forward_chunk(k); };
  auto microbatch = [&](int64_t k) { return table[size_t(k % total)].microbatch; };
  // A forward output leaves the pipeline's last stage only through the loss; a backward's input gradient
  // is dropped at the first stage's first chunk.
  auto sends_activation = [&](int64_t k) { return !(last && forward_chunk(k) == v_size - 1); };
  auto sends_grad = [&](int64_t k) { return !(first && backward_chunk(k) == 0); };

  // §3.7 receiving rule, for the step after k. The leading stage (stage 0 in forward, stage P-1 in backward)
  // runs P-1 virtual steps ahead of the stage it receives from around the ring, so what arrives belongs to
  // step k-(P-1) there, one chunk further along; nothing arrives before that stage has produced anything, or
  // from the chunk that ends the pipeline.
  struct Incoming {
    bool recv = false;
    int64_t microbatch = 0;
    int64_t chunk = 0;
  };
  auto incoming_activation = [&](int64_t k) -> Incoming {
    if (!first) return {true, microbatch(k + 1), forward_chunk(k + 1)};
    if (k < p_size - 1) return {};
    const int64_t j = k - (p_size - 1);
    if (forward_chunk(j) == v_size - 1) return {};
    return {true, microbatch(j), forward_chunk(j) + 1};
  };
  auto incoming_grad = [&](int64_t k) -> Incoming {
    if (!last) return {true, microbatch(k + 1), backward_chunk(k + 1)};
    if (k < p_size - 1) return {};
    const int64_t j = k - (p_size - 1);
    if (backward_chunk(j) == 0) return {};
    return {true, microbatch(j), backward_chunk(j) - 1};
  };

  StageListBuilder b(p_size, stage);
  // Parameter all-gathers: the first two chunks up front; chunk c+1 (c+1 >= 2) when, p steps from now, chunk c
  // starts its first micro-batch. The offset p lines the launches up across stages.
  b.marker(ActionKind::param_gather, 0);
  b.marker(ActionKind::param_gather, 1);
  auto forward_step = [&](int64_t k) {
    const int64_t sync_k = k + stage;
    if (sync_k < total && microbatch(sync_k) == 0) {
      const int64_t chunk = forward_chunk(sync_k) + 1;
      if (chunk > 1 && chunk < v_size) b.marker(ActionKind::param_gather, chunk);
    }
    b.compute(ActionKind::forward, microbatch(k), forward_chunk(k));
  };
  // Gradient sync: enabled right before a chunk's last backward; launched p steps after it (aligned across
  // stages), or at the end for the chunks whose aligned point never came.
  std::vector<bool> launched(size_t(v_size), false);
  auto backward_step = [&](int64_t k) {
    if (microbatch(k) == m - 1) b.marker(ActionKind::enable_grad_sync, backward_chunk(k));
    b.compute(ActionKind::backward, microbatch(k), backward_chunk(k));
    const int64_t sync_k = k - stage;
    if (sync_k >= 0 && microbatch(sync_k) == m - 1) {
      b.marker(ActionKind::launch_grad_sync, backward_chunk(sync_k));
      launched[size_t(backward_chunk(sync_k))] = true;
    }
  };

  if (!first) b.recv_activation(microbatch(0), forward_chunk(0));
  b.flush();
  for (int64_t k = 0; k < warmup; ++k) {
    forward_step(k);
    Incoming in = incoming_activation(k);
    if (k == total - 1) in.recv = false;
    if (sends_activation(k)) b.send_activation(microbatch(k), forward_chunk(k));
    if (in.recv) b.recv_activation(in.microbatch, in.chunk);
    // The last warmup step also receives the gradient of the first backward (chunk V-1).
    if (k == warmup - 1 && train && !all_warmup && !last) b.recv_grad(microbatch(0), backward_chunk(0));
    b.flush();
  }
  for (int64_t k = 0; k < remaining; ++k) {
    const int64_t fwd_k = k + warmup;
    forward_step(fwd_k);
    backward_step(k);
    Incoming in_act = incoming_activation(fwd_k);
    if (k == remaining - 1) in_act.recv = false;
    const Incoming in_grad = incoming_grad(k);
    if (sends_activation(fwd_k)) b.send_activation(microbatch(fwd_k), forward_chunk(fwd_k));
    if (sends_grad(k)) b.send_grad(microbatch(k), backward_chunk(k));
    if (in_act.recv) b.recv_activation(in_act.microbatch, in_act.chunk);
    if (in_grad.recv) b.recv_grad(in_grad.microbatch, in_grad.chunk);
    b.flush();
  }
  if (train) {
    if (all_warmup && !last) b.recv_grad(microbatch(0), backward_chunk(0));
    b.flush();
    for (int64_t k = remaining; k < total; ++k) {
      backward_step(k);
      Incoming in = incoming_grad(k);
      if (k == total - 1) in.recv = false;
      if (sends_grad(k)) b.send_grad(microbatch(k), backward_chunk(k));
      if (in.recv) b.recv_grad(in.microbatch, in.chunk);
      b.flush();
    }
    for (int64_t chunk = 0; chunk < v_size; ++chunk) {
      if (!launched[size_t(chunk)]) b.marker(ActionKind::launch_grad_sync, chunk);
    }
  }
  return b.take();
}

PipelineSchedule make_pipeline_schedule(const ScheduleShape& shape) {
  shape.validate();
  PipelineSchedule schedule{shape, {}};
  for (int64_t stage = 0; stage < shape.num_stages; ++stage) {
    if (shape.num_stages == 1) {
      schedule.stages.push_back(make_no_pipelining_schedule(shape.num_microbatches, shape.pass));
    } else if (shape.num_chunks == 1) {
      schedule.stages.push_back(make_1f1b_schedule(shape.num_stages, stage, shape.num_microbatches, shape.pass));
    } else {
      schedule.stages.push_back(make_interleaved_1f1b_schedule(shape.num_stages, stage, shape.num_chunks,
                                                               shape.num_microbatches, shape.microbatch_group_size,
                                                               shape.pass));
    }
  }
  return schedule;
}

std::string action_label(const PipelineAction& action) {
  switch (action.kind) {
    case ActionKind::forward: return fmt::format("F{}.{}", action.microbatch, action.chunk);
    case ActionKind::backward: return fmt::format("B{}.{}", action.microbatch, action.chunk);
    case ActionKind::param_gather: return fmt::format("ag{}", action.chunk);
    case ActionKind::enable_grad_sync: return fmt::format("es{}", action.chunk);
    case ActionKind::launch_grad_sync: return fmt::format("rs{}", action.chunk);
    case ActionKind::communicate: break;
  }
  std::string label;
  for (const Transfer& t : action.transfers) {
    if (!label.empty()) label += '+';
    label += fmt::format("{}{}{}.{}", t.direction == TransferDirection::send ? '>' : '<',
                         t.tensor == TransferTensor::activation ? 'a' : 'g', t.microbatch, t.chunk);
  }
  return label;
}

}  // namespace rf::engine::pipeline
