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
// Span mode (context parallel's blocks, model/context_attention.h): with `spans` set, there is no causal
// mask and no document list: span i lets query rows [q_begin, q_end) attend to every key row
// [k_begin, k_end), both on the flattened token axes (q: b*Tq + t, k: b*Tk + s; k may have another
// length Tk than q's Tq). Spans are sorted, their query ranges disjoint and their key ranges disjoint, each
// inside one row; no RoPE (q and k come rotated). Forward writes every row: a query row in no span gets
// out = 0 and lse = -inf (a block that contributes nothing to the ring-attention merge). Backward is called
// with the *merged* out and lse of all blocks (P and rowsum(dO * O) are the global softmax's, so the
// blocks' gradients add up exactly) and overwrites dq, dk, dv everywhere: rows in no span get 0.
// Ring-attention update (MindSpeed's npu_ring_attention_update, megatron.md §5.2): merges one block's
// normalised output and lse into a running result, per (row, head):
//   lse' = log(exp(lse) + exp(lse_i)),  out' = exp(lse - lse') out + exp(lse_i - lse') out_i
// A part row with lse_i = -inf leaves the running row as it is; a running row with lse = -inf takes the part's.
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

// One block of span mode: query rows [q_begin, q_end) see key rows [k_begin, k_end), unmasked.
struct AttentionSpan {
  int64_t q_begin, q_end, k_begin, k_end;
};

struct AttentionParams {
  double softmax_scale = 0.0;  // 0: 1 / sqrt(D)
  std::span<const int32_t> cu_seqlens;
  std::optional<AttentionRope> rope;
  std::span<const AttentionSpan> spans;  // non-empty: span mode (no cu_seqlens, no rope)
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
// part_out_BTHD (f32, bf16, f64) and part_lse_BHT: one block's result; acc_out_BTHD (f32, f64 for f64 parts)
// and acc_lse_BHT: the running merge, updated in place. Same B, T, H, D.
using AttentionMerge = void(TensorView part_out_BTHD, TensorView part_lse_BHT, TensorView acc_out_BTHD,
                            TensorView acc_lse_BHT);
using AttentionMergeFn = AttentionMerge*;

}  // namespace rf::kernels
