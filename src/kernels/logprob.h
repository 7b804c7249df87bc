// Softmax cross-entropy fused with the per-token outputs RL needs: with z = logits / temperature,
//   logp[n]    = z[n, target[n]] - lse(z[n]),          (the negative cross-entropy)
//   entropy[n] = lse(z[n]) - sum_v softmax(z[n])_v z[n, v].
// A negative target (HF's ignore_index -100) gives logp 0 and no gradient through logp.
// Backward, with p = softmax(z):
//   dz_v = dlogp (1[v = target] - p_v)  -  dentropy p_v (z_v - lse + entropy),
//   dlogits = dz / temperature.
// Vocab-parallel ready: `vocab_start` is the first vocabulary id of these logits' columns. The
// kernels accept only vocab_start == 0 for now: a shard's max and sum-exp must first be reduced
// across the tensor-parallel ranks, which is the dist layer's job, not a kernel's.
// A target >= V (with vocab_start 0) is an error.
// Legend: N tokens, V vocab (columns held here).
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

struct LogprobParams {
  double temperature = 1.0;
  int64_t vocab_start = 0;
};

// logits_NV: f32, bf16 or f64. targets_N: i32 or i64. logp_N, lse_N (saved for backward) and
// entropy_N (optional: empty view = not computed) are f32 (f64 for f64 logits).
using LogprobForward = void(const LogprobParams&, TensorView logits_NV, TensorView targets_N,
                                  TensorView logp_N, TensorView entropy_N, TensorView lse_N);
using LogprobForwardFn = LogprobForward*;
// dlogits_NV is overwritten (dtype of logits). dentropy_N may be empty (no entropy term); then
// entropy_N is not read.
using LogprobBackward = void(const LogprobParams&, TensorView logits_NV, TensorView targets_N,
                                   TensorView lse_N, TensorView entropy_N, TensorView dlogp_N,
                                   TensorView dentropy_N, TensorView dlogits_NV);
using LogprobBackwardFn = LogprobBackward*;

}  // namespace rf::kernels
