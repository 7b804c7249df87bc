// The attention half of a decoder layer, with its pre-norm and residual:
//   xn = rmsnorm(x);  q, k, v = xn Wq^T (+bq), xn Wk^T (+bk), xn Wv^T (+bv)
//   [qwen3] q, k = rmsnorm per head (q_norm, k_norm)
//   a = attention(rope(q), rope(k), v);  h = x + a Wo^T
// RoPE runs inside the attention kernel as it loads q and k (kernels/attention.h), so the saved q and
// k are the un-rotated ones and the attention backward returns their gradients directly. With a
// batch-invariant kernel registry the forward runs the rollout's paged kernel instead
// (paged_order_attention.h), on q and k rotated first (and saved so).
// Tensor parallel: q/k/v are column-parallel (heads split over TP: H, K here are H/tp, K/tp), o_proj
// is row-parallel; the region's entry and exit (TpCopy / TpReduce, or with sequence parallel the
// gather / reduce-scatter of the sequence) are tp_region.h's. x and h are this rank's rows of the
// residual stream (all N tokens, or N / tp with SP); everything between covers all N tokens.
// Context parallel (BatchShape::context set): the tokens are this CP rank's share of the micro-batch, q and k are
// rotated first (and saved so: the ring sends rotated keys), and attention runs over the CP group
// (context_attention.h) in the layer context's CP workspace.
// Legend: N tokens, C hidden, H query heads, K kv heads, D head dim.
#pragma once

#include "core/tensor.h"
#include "model/context_attention.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/paged_batch.h"
#include "model/paged_order_attention.h"
#include "model/recompute_policy.h"
#include "model/saved_tensors.h"

namespace rf::model {

// Views of one layer's attention parameters (or of their gradients: same names, same shapes).
struct AttentionParams {
  TensorView norm_w_C;
  TensorView wq_HDC, wk_KDC, wv_KDC;
  TensorView bq_HD, bk_KD, bv_KD;  // empty without attention_bias
  TensorView q_norm_w_D, k_norm_w_D;  // empty without qk_norm
  TensorView wo_CHD;

  template <class Store>
  static AttentionParams bind(const Store& store, int64_t layer, const ModelConfig& config);
};

// Exactly what backward needs, sized for up to `max_tokens` at reserve time. With selective recompute the
// discarded tensors are empty here and live in the chunk's shared AttentionSaved (`discarded` below).
struct AttentionSaved {
  Tensor xn_NC, rstd_N;         // pre-norm output and its statistics
  Tensor q_NHD, k_NKD, v_NKD;   // after q/k norm, before rope: what attention read
  Tensor q_raw_NHD, k_raw_NKD;  // before q/k norm (qwen3 only)
  Tensor rstd_q_NH, rstd_k_NK;
  Tensor attn_NHD, lse_BHT;
  PagedOrderScratch paged_order;  // batch-invariant registries only (paged_order_attention.h)

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xn_NC, &rstd_N, &q_NHD, &k_NKD, &v_NKD, &q_raw_NHD, &k_raw_NKD, &rstd_q_NH, &rstd_k_NK,
                      &attn_NHD, &lse_BHT})
      f(*t);
  }
};

// Gradient scratch shared by all layers (overwritten each layer).
struct AttentionScratch {
  Tensor dxn_NC, dq_NHD, dk_NKD, dv_NKD, dq_raw_NHD, dk_raw_NKD, dattn_NHD;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&dxn_NC, &dq_NHD, &dk_NKD, &dv_NKD, &dq_raw_NHD, &dk_raw_NKD, &dattn_NHD}) f(*t);
  }
};

class AttentionBlock {
 public:
  AttentionBlock(const ModelConfig& config, int64_t tp_size, int cp_size = 1,
                 dist::CpCommType cp_comm_type = dist::CpCommType::p2p);
  // The context-parallel attention's workspace for up to max_local_tokens tokens (nothing without CP).
  void reserve(ContextAttentionScratch& scratch, int64_t max_local_tokens, DType dtype, TensorAccount account) const {
    context_.reserve(scratch, max_local_tokens, dtype, account);
  }

  // What forward keeps for backward of up to max_tokens tokens, those `discard` recomputes marked discarded
  // (core_attn: the attention output and lse; layernorm: the pre-norm's output and rstd).
  std::vector<SavedTensorSpec<AttentionSaved>> saved_tensors(int64_t max_tokens, DType dtype,
                                                             const SelectiveRecompute& discard) const;
  // Allocates `part` of saved_tensors: a micro-batch's kept tensors, or the discarded ones of the shared scratch.
  void reserve(AttentionSaved& saved, int64_t max_tokens, DType dtype, TensorAccount account,
               const SelectiveRecompute& discard = {}, SavedPart part = SavedPart::kept) const;
  void reserve(AttentionScratch& scratch, int64_t max_tokens, DType dtype, TensorAccount account) const;

  // h_NC = x_NC + attention(x_NC). What `saved` has no room for goes to `discarded` (the chunk's shared scratch).
  void forward(const LayerContext& ctx, const BatchShape& shape, const AttentionParams& w, TensorView x_NC,
               TensorView h_NC, AttentionSaved& saved, AttentionSaved& discarded) const;
  // Inference over a paged KV cache (the rollout engine): the new tokens' keys and values are rotated
  // and written to `cache` at batch.slot_mapping_N, then each query attends to its sequence's cached
  // tokens (kernels/paged_attention.h); h_NC = x_NC + attention(x_NC). TP without sequence parallel;
  // `scratch` is any AttentionSaved reserved for the batch's tokens (nothing is kept for a backward).
  void forward_paged(const LayerContext& ctx, const PagedBatch& batch, const AttentionParams& w, TensorView x_NC,
                     TensorView h_NC, AttentionSaved& scratch, const PagedLayerCache& cache) const;
  // dresid_NC holds dL/dh on entry and dL/dx on return (the residual stream accumulates);
  // parameter gradients += into g. The tensors `saved` lacks are recomputed into `discarded` first, by the
  // forward's own kernels from the same inputs: the same bits.
  void backward(const LayerContext& ctx, const BatchShape& shape, const AttentionParams& w,
                const AttentionParams& g, TensorView x_NC, const AttentionSaved& saved, AttentionSaved& discarded,
                AttentionScratch& scratch, TensorView dresid_NC) const;

 private:
  struct Projected {
    TensorView q_NHD, k_NKD, v_NKD;  // after the q/k norms, before RoPE
  };
  // The pre-norm of this rank's n rows x_NC, entering the column-parallel region: all N tokens' normed rows,
  // in xn_NC (and this rank's statistics in rstd_N).
  TensorView normed_input(const LayerContext& ctx, int64_t N, int64_t n, const AttentionParams& w, TensorView x_NC,
                          TensorView xn_NC, TensorView rstd_N) const;
  // The pre-norm and the q/k/v projections (+ q/k norms) of N tokens from this rank's n rows x_NC,
  // into `s` (the norm's output and statistics into `d` where `s` has no room for them).
  Projected project_qkv(const LayerContext& ctx, int64_t N, int64_t n, const AttentionParams& w, TensorView x_NC,
                        AttentionSaved& s, AttentionSaved& d) const;
  // Whether q and k are rotated before the attention (and saved so) rather than inside its kernel.
  static bool rotates_first(const LayerContext& ctx, const BatchShape& shape) {
    return ctx.kernels.batch_invariant() || shape.context != nullptr;
  }
  // The attention kernel on q, k and v (rotated already with a batch-invariant registry or CP), into attn and lse.
  void core_attention(const LayerContext& ctx, const BatchShape& shape, TensorView q_NHD, TensorView k_NKD,
                      TensorView v_NKD, TensorView attn_NHD, TensorView lse, PagedOrderScratch& paged_order) const;
  // Causal attention over the batch's documents, with RoPE at the tokens' positions.
  kernels::AttentionParams attention_params(const BatchShape& shape) const;

  bool qk_norm_;
  double eps_;
  kernels::RopeParams rope_;
  int64_t C_, H_, K_, D_;  // H and K are per TP rank
  ContextAttention context_;
};

}  // namespace rf::model
