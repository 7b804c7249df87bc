// What every layer's forward/backward needs besides its own weights: the kernels, the role's
// parallel groups, how backward writes weight gradients, and the shape of the current micro-batch.
// Legend: B rows, T tokens per row, N = B*T tokens.
#pragma once

#include <span>

#include "dist/parallel_context.h"
#include "kernels/kernel_registry.h"

namespace rf::model {

class ContextSplit;
struct ContextAttentionScratch;

struct LayerContext {
  const kernels::KernelRegistry& kernels;
  dist::ParallelContext& parallel;
  // How linear layers' weight gradients join the GradBuffer: += (accumulating micro-batches), or =
  // for the first backward after the buffer was zeroed (every linear weight gets exactly one wgrad
  // per backward, so overwriting is exact and skips reading the zeros). Norm and embedding
  // gradients always +=: a tied embedding's head wgrad runs before its embedding backward.
  kernels::Accumulate linear_weight_grads = kernels::Accumulate::add;
  // Sequence parallel only (tp_region.h): [capacity, C] workspace shared by all layers, for the
  // gathered or partial full rows and for this rank's local rows.
  TensorView sp_full_NC, sp_local_NC;
  // Their first n rows (empty views without sequence parallel).
  // Context parallel only (context_attention.h): the attention's workspace shared by all layers.
  ContextAttentionScratch* cp_scratch = nullptr;
  TensorView sp_full(int64_t n) const { return sp_full_NC.empty() ? TensorView() : sp_full_NC.slice(0, 0, n); }
  TensorView sp_local(int64_t n) const { return sp_local_NC.empty() ? TensorView() : sp_local_NC.slice(0, 0, n); }
};

// The first n rows of a buffer sized for the model's capacity (activations and workspace are reserved
// once for the largest micro-batch; a micro-batch uses their head).
inline TensorView rows(TensorView buffer, int64_t n) { return buffer.slice(0, 0, n); }

struct BatchShape {
  int64_t batch = 1;    // B
  int64_t seq_len = 0;  // T
  int64_t local_tokens = 0;  // n: this rank's rows of the residual stream (N, or N / tp with SP)
  int64_t num_tokens() const { return batch * seq_len; }
  TensorView positions_N;
  std::span<const int32_t> cu_seqlens;
  // Context parallel: how the micro-batch is split over the CP group (these are this rank's tokens); else null.
  const ContextSplit* context = nullptr;
};

}  // namespace rf::model
