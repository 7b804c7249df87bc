// Causal grouped-query attention (GQA): query head h reads kv head h / (H / K).
//   out[b, t, h] = sum_{s <= t, same document} softmax_s(scale * q[b,t,h] . k[b,s,kv]) v[b,s,kv]
// Packed sequences: `cu_seqlens` holds document boundaries [0, e1, e2, ..., B*T] on the flattened
// B*T token axis (flash-attention's varlen convention, MindSpeed's "EOD reset"); every document must
// lie inside one row. Empty means each row is one document.
// Saved: the log-sum-exp of the scaled scores per (b, h, t), so backward recomputes the
// probabilities instead of storing the T x T matrix (flash-attention's contract).
// RoPE fused into the load: with `rope` set, q and k are the tensors before RoPE (kernels/rope.h),
// rotated as the kernel reads them, and dq, dk are the gradients w.r.t. those un-rotated tensors
// (rotated back as they are written): the same as rope_forward on q and k, attention, and
// rope_backward on dq and dk, without the four passes over q and k that costs.
// Backward, with P the probabilities and dO the output gradient:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),  dQ = scale dS K,  dK = scale dS^T Q
// (dK and dV summed over the H/K query heads that share a kv head).
// Legend: B batch, T sequence, H query heads, K kv heads, D head dim.
#pragma once

#include <span>

#include <optional>

#include "core/tensor_view.h"
#include "kernels/rope.h"

namespace rf::kernels {

struct AttentionRope {
  RopeParams params;
  TensorView positions_N;  // i32 or i64, the position of each of the N = B*T tokens
};

struct AttentionParams {
  double softmax_scale = 0.0;  // 0: 1 / sqrt(D)
  std::span<const int32_t> cu_seqlens;
  std::optional<AttentionRope> rope;
};

// q_BTHD, k_BTKD, v_BTKD, out_BTHD: one floating dtype (f32, bf16, f64); inner dim contiguous.
// lse_BHT: f32 (f64 for f64 inputs), written.
using AttentionForward = void(const AttentionParams&, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                                    TensorView out_BTHD, TensorView lse_BHT);
using AttentionForwardFn = AttentionForward*;
// dq, dk, dv overwritten; same dtype as q.
using AttentionBackward = void(const AttentionParams&, TensorView q_BTHD, TensorView k_BTKD,
                                     TensorView v_BTKD, TensorView out_BTHD, TensorView lse_BHT,
                                     TensorView dout_BTHD, TensorView dq_BTHD, TensorView dk_BTKD,
                                     TensorView dv_BTKD);
using AttentionBackwardFn = AttentionBackward*;

}  // namespace rf::kernels
