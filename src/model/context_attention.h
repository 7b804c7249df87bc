// Causal attention over a sequence split over the context-parallel group (megatron.md §5): each CP rank holds
// its ContextSplit share of every document (context_split.h) as q, k, v of its local heads, already rotated by
// RoPE at the tokens' original positions; attention is the only layer that communicates. cp_comm_type:
//  - p2p (ring attention, §5.2-5.3): the keys and values go around the ring, the next block's transfer
//    posted before this block's compute. Forward, at step i a rank holds the block of rank j = r - i: its own
//    (causal over its documents' two halves), an earlier rank's (all queries x the early halves) or a later
//    rank's (the late halves x both); each block's normalised output and lse are merged into an f32 running
//    result by the ring-attention update kernel (kernels/attention.h). Backward runs the other way (send to
//    r - 1): its own block first, while the neighbour's keys arrive, then rank r + i's at step i, each block's
//    gradients from the flash backward with the merged out and lse (exact: the global softmax's P and delta);
//    dq adds up locally, a block's dk and dv travel with it and end, summed, on their owner after CP - 1
//    transfers (the owner's own block's part waits locally for them).
//  - all_gather (§5.4): every rank's keys and values gathered, the same blocks and merge without a ring;
//    backward reduce-scatters the blocks' dk and dv to their owners.
//  - a2a (Ulysses, §5.5): an all-to-all trades heads for the sequence (each rank gets 1/CP of the heads for
//    every token), the rows are put in the padded natural order, ordinary causal attention over the padded
//    documents runs, and the inverse all-to-all brings the output back. Needs H and K (per TP rank) divisible by CP.
// Saved for backward: q, k, v (this rank's, rotated), out, and the lse: [H, n] for p2p and all_gather, the a2a
// layout's [H / CP, CP n] for a2a (the same count).
// Legend: n local tokens, H query heads, K kv heads, D head dim (per TP rank), P = CP size.
#pragma once

#include "core/tensor.h"
#include "model/context_split.h"
#include "model/layer_context.h"

namespace rf::model {

// Where the ring's time went in the passes since the last reset: compute of the blocks, and the time spent
// waiting for the next block's keys and values (or for dk and dv) after the compute was done: the transfer the
// overlap did not hide.
struct RingTimes {
  double compute_s = 0, wait_s = 0;
  int64_t steps = 0;
};

// Workspace of one layer's call, shared by all layers (as AttentionScratch). "acc" tensors are f32 (f64 for f64).
struct ContextAttentionScratch {
  Tensor k_in[3], v_in[3];                      // p2p: the block held, the one arriving, the one leaving [n, K, D]
  Tensor dk_out[2], dv_out[2], dk_in, dv_in;    // p2p backward (acc): a block's gradients leaving and arriving
  Tensor dk_own, dv_own;                        // p2p backward (acc): the own block's, until the ring brings the rest
  Tensor k_all, v_all, dk_all, dv_all;          // all_gather: every rank's block, [P n, K, D] (gradients acc)
  Tensor dk_mine, dv_mine;                      // all_gather backward (acc): this rank's, reduce-scattered
  Tensor part_out, part_lse;                    // a block's output (dtype) and lse (stat dtype)
  Tensor acc_out;                               // (acc) the merged output; backward: dq summed over the blocks
  Tensor dq_part, dk_part, dv_part;             // a block's gradients (dtype)
  Tensor heads[5], sendbuf, recvbuf;            // a2a: q, k, v, out, dout in the head layout; exchange buffers
  RingTimes times;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&k_in[0], &k_in[1], &k_in[2], &v_in[0], &v_in[1], &v_in[2], &dk_out[0], &dk_out[1],
                      &dv_out[0], &dv_out[1], &dk_in, &dv_in, &dk_own, &dv_own, &k_all, &v_all, &dk_all, &dv_all,
                      &dk_mine, &dv_mine, &part_out, &part_lse, &acc_out, &dq_part, &dk_part, &dv_part, &heads[0],
                      &heads[1], &heads[2], &heads[3], &heads[4], &sendbuf, &recvbuf})
      f(*t);
  }
};

class ContextAttention {
 public:
  // H, K: heads per TP rank. Refuses (naming the sizes) a2a with heads that do not divide by cp_size.
  ContextAttention(int64_t H, int64_t K, int64_t D, int cp_size, dist::CpCommType type);
  int cp_size() const { return cp_size_; }

  void reserve(ContextAttentionScratch& s, int64_t max_local_tokens, DType dtype, TensorAccount account) const;
  // out_nHD (dtype) and lse (stat dtype, H n values) of this rank's queries.
  void forward(const LayerContext& ctx, const ContextSplit& split, TensorView q_nHD, TensorView k_nKD,
               TensorView v_nKD, TensorView out_nHD, TensorView lse, ContextAttentionScratch& s) const;
  // dq, dk, dv (overwritten) of this rank's q, k, v from dout; out and lse as forward wrote them.
  void backward(const LayerContext& ctx, const ContextSplit& split, TensorView q_nHD, TensorView k_nKD,
                TensorView v_nKD, TensorView out_nHD, TensorView lse, TensorView dout_nHD, TensorView dq_nHD,
                TensorView dk_nKD, TensorView dv_nKD, ContextAttentionScratch& s) const;

 private:
  void ring_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k, TensorView v,
                    TensorView out, TensorView lse, ContextAttentionScratch& s) const;
  void ring_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k, TensorView v,
                     TensorView out, TensorView lse, TensorView dout, TensorView dq, TensorView dk, TensorView dv,
                     ContextAttentionScratch& s) const;
  void gathered_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k, TensorView v,
                        TensorView out, TensorView lse, ContextAttentionScratch& s) const;
  void gathered_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                         TensorView v, TensorView out, TensorView lse, TensorView dout, TensorView dq, TensorView dk,
                         TensorView dv, ContextAttentionScratch& s) const;
  void ulysses_forward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k, TensorView v,
                       TensorView out, TensorView lse, ContextAttentionScratch& s) const;
  void ulysses_backward(const LayerContext& ctx, const ContextSplit& split, TensorView q, TensorView k,
                        TensorView v, TensorView out, TensorView lse, TensorView dout, TensorView dq, TensorView dk,
                        TensorView dv, ContextAttentionScratch& s) const;

  int64_t H_, K_, D_;
  int cp_size_;
  dist::CpCommType type_;
};

}  // namespace rf::model
