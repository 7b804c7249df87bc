#include "model/attention_block.h"

#include "model/paged_order_attention.h"
#include "model/param_layout.h"
#include "model/param_store.h"
#include "model/tp_region.h"

namespace rf::model {
namespace {

using kernels::Accumulate;

TensorView optional_param(const auto& store, int64_t layer, const char* suffix, bool present) {
  return present ? store.get(layer_param_name(layer, suffix)) : TensorView();
}

}  // namespace

template <class Store>
AttentionParams AttentionParams::bind(const Store& s, int64_t l, const ModelConfig& c) {
  AttentionParams p;
  p.norm_w_C = s.get(layer_param_name(l, "input_layernorm.weight"));
  p.wq_HDC = s.get(layer_param_name(l, "self_attn.q_proj.weight"));
  p.wk_KDC = s.get(layer_param_name(l, "self_attn.k_proj.weight"));
  p.wv_KDC = s.get(layer_param_name(l, "self_attn.v_proj.weight"));
  p.bq_HD = optional_param(s, l, "self_attn.q_proj.bias", c.attention_bias);
  p.bk_KD = optional_param(s, l, "self_attn.k_proj.bias", c.attention_bias);
  p.bv_KD = optional_param(s, l, "self_attn.v_proj.bias", c.attention_bias);
  p.q_norm_w_D = optional_param(s, l, "self_attn.q_norm.weight", c.qk_norm);
  p.k_norm_w_D = optional_param(s, l, "self_attn.k_norm.weight", c.qk_norm);
  p.wo_CHD = s.get(layer_param_name(l, "self_attn.o_proj.weight"));
  return p;
}
template AttentionParams AttentionParams::bind<ParamStore>(const ParamStore&, int64_t, const ModelConfig&);
template AttentionParams AttentionParams::bind<GradBuffer>(const GradBuffer&, int64_t, const ModelConfig&);

AttentionBlock::AttentionBlock(const ModelConfig& c, int64_t tp_size, int cp_size, dist::CpCommType cp_comm_type)
    : qk_norm_(c.qk_norm),
      eps_(c.rms_norm_eps),
      rope_{.theta = c.rope_theta, .rotary_dim = 0, .scaling = c.rope_scaling},
      C_(c.hidden_size),
      H_(c.num_attention_heads / tp_size),
      K_(c.num_key_value_heads / tp_size),
      D_(c.head_dim),
      context_(H_, K_, D_, cp_size, cp_comm_type) {}

std::vector<SavedTensorSpec<AttentionSaved>> AttentionBlock::saved_tensors(int64_t N, DType dtype,
                                                                           const SelectiveRecompute& discard) const {
  const DType stat = dtype == DType::f64 ? DType::f64 : DType::f32;
  using S = AttentionSaved;
  std::vector<SavedTensorSpec<S>> specs = {
      {"attention norm output", &S::xn_NC, {N, C_}, dtype, discard.layernorm},
      {"attention norm rstd", &S::rstd_N, {N}, stat, discard.layernorm},
      {"q", &S::q_NHD, {N, H_, D_}, dtype},
      {"k", &S::k_NKD, {N, K_, D_}, dtype},
      {"v", &S::v_NKD, {N, K_, D_}, dtype},
  };
  if (qk_norm_) {
    specs.push_back({"q before q_norm", &S::q_raw_NHD, {N, H_, D_}, dtype});
    specs.push_back({"k before k_norm", &S::k_raw_NKD, {N, K_, D_}, dtype});
    specs.push_back({"q_norm rstd", &S::rstd_q_NH, {N, H_}, stat});
    specs.push_back({"k_norm rstd", &S::rstd_k_NK, {N, K_}, stat});
  }
  specs.push_back({"attention output", &S::attn_NHD, {N, H_, D_}, dtype, discard.core_attn});
  // viewed as [B, H, T] for any B x T = N
  specs.push_back({"attention lse", &S::lse_BHT, {N * H_}, stat, discard.core_attn});
  return specs;
}

void AttentionBlock::reserve(AttentionSaved& s, int64_t N, DType dtype, TensorAccount a,
                             const SelectiveRecompute& discard, SavedPart part) const {
  allocate(saved_tensors(N, dtype, discard), part, s, a);
}

void AttentionBlock::reserve(AttentionScratch& s, int64_t N, DType dtype, TensorAccount a) const {
  s.dxn_NC = Tensor({N, C_}, dtype, a);
  s.dq_NHD = Tensor({N, H_, D_}, dtype, a);
  s.dk_NKD = Tensor({N, K_, D_}, dtype, a);
  s.dv_NKD = Tensor({N, K_, D_}, dtype, a);
  if (qk_norm_) {
    s.dq_raw_NHD = Tensor({N, H_, D_}, dtype, a);
    s.dk_raw_NKD = Tensor({N, K_, D_}, dtype, a);
  }
  s.dattn_NHD = Tensor({N, H_, D_}, dtype, a);
}

kernels::AttentionParams AttentionBlock::attention_params(const BatchShape& shape) const {
  return {.softmax_scale = 0.0, .cu_seqlens = shape.cu_seqlens, .rope = kernels::AttentionRope{rope_, shape.positions_N}};
}

TensorView AttentionBlock::normed_input(const LayerContext& ctx, int64_t N, int64_t n, const AttentionParams& w,
                                        TensorView x_NC, TensorView xn_NC, TensorView rstd_N) const {
  // x is this rank's n rows of the residual stream; from the QKV projections on, all N tokens.
  TensorView xn_local = ctx.parallel.sequence_parallel() ? ctx.sp_local(n) : rows(xn_NC, N);
  kernels::RmsNormSaved norm_saved{rows(rstd_N, n)};
  ctx.kernels.rmsnorm_forward({eps_}, x_NC, w.norm_w_C, xn_local, norm_saved);
  return enter_column_parallel(ctx, xn_local, rows(xn_NC, N));
}

AttentionBlock::Projected AttentionBlock::project_qkv(const LayerContext& ctx, int64_t N, int64_t n,
                                                     const AttentionParams& w, TensorView x_NC, AttentionSaved& s,
                                                     AttentionSaved& d) const {
  const auto& k = ctx.kernels;
  const TensorView xn_NC = normed_input(ctx, N, n, w, x_NC, held(s.xn_NC, d.xn_NC), held(s.rstd_N, d.rstd_N));
  TensorView q_NHD = rows(s.q_NHD, N), k_NKD = rows(s.k_NKD, N), v_NKD = rows(s.v_NKD, N);
  TensorView q_proj = qk_norm_ ? rows(s.q_raw_NHD, N) : q_NHD;
  TensorView k_proj = qk_norm_ ? rows(s.k_raw_NKD, N) : k_NKD;
  k.linear_forward(xn_NC, w.wq_HDC, w.bq_HD, q_proj.reshape({N, H_ * D_}));
  k.linear_forward(xn_NC, w.wk_KDC, w.bk_KD, k_proj.reshape({N, K_ * D_}));
  k.linear_forward(xn_NC, w.wv_KDC, w.bv_KD, v_NKD.reshape({N, K_ * D_}));
  if (qk_norm_) {
    kernels::RmsNormSaved q_saved{rows(s.rstd_q_NH, N).reshape({N * H_})};
    kernels::RmsNormSaved k_saved{rows(s.rstd_k_NK, N).reshape({N * K_})};
    k.rmsnorm_forward({eps_}, q_proj.reshape({N * H_, D_}), w.q_norm_w_D, q_NHD.reshape({N * H_, D_}), q_saved);
    k.rmsnorm_forward({eps_}, k_proj.reshape({N * K_, D_}), w.k_norm_w_D, k_NKD.reshape({N * K_, D_}), k_saved);
  }
  return {q_NHD, k_NKD, v_NKD};
}

void AttentionBlock::core_attention(const LayerContext& ctx, const BatchShape& shape, TensorView q_NHD,
                                    TensorView k_NKD, TensorView v_NKD, TensorView attn_NHD, TensorView lse,
                                    PagedOrderScratch& paged_order) const {
  const auto& k = ctx.kernels;
  const int64_t B = shape.batch, T = shape.seq_len;
  if (shape.context) {
    RF_CHECK(ctx.cp_scratch != nullptr, "context-parallel attention without its workspace");
    context_.forward(ctx, *shape.context, q_NHD, k_NKD, v_NKD, attn_NHD, lse.slice(0, 0, B * H_ * T), *ctx.cp_scratch);
    return;
  }
  TensorView lse_BHT = lse.slice(0, 0, B * H_ * T).reshape({B, H_, T});
  if (k.batch_invariant())
    attention_forward_paged_order(k, shape.cu_seqlens, B, T, q_NHD, k_NKD, v_NKD, attn_NHD, lse_BHT, paged_order);
  else
    k.attention_forward(attention_params(shape), q_NHD.reshape({B, T, H_, D_}), k_NKD.reshape({B, T, K_, D_}),
                        v_NKD.reshape({B, T, K_, D_}), attn_NHD.reshape({B, T, H_, D_}), lse_BHT);
}

void AttentionBlock::forward(const LayerContext& ctx, const BatchShape& shape, const AttentionParams& w,
                             TensorView x_NC, TensorView h_NC, AttentionSaved& s, AttentionSaved& d) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens();
  const Projected p = project_qkv(ctx, N, shape.local_tokens, w, x_NC, s, d);
  if (rotates_first(ctx, shape)) {
    // The rollout's arithmetic (paged_order_attention.h): q and k rotated as the rollout rotates them,
    // and saved rotated, so backward runs the attention without RoPE and rotates the gradients back. Context
    // parallel: the ring passes keys rotated at their own positions.
    k.rope_forward(rope_, shape.positions_N, p.q_NHD);
    k.rope_forward(rope_, shape.positions_N, p.k_NKD);
  }
  TensorView attn_NHD = rows(held(s.attn_NHD, d.attn_NHD), N);
  core_attention(ctx, shape, p.q_NHD, p.k_NKD, p.v_NKD, attn_NHD, held(s.lse_BHT, d.lse_BHT), s.paged_order);

  // h = x + a Wo^T, with the residual added in the GEMM's epilogue (tp_region.h).
  row_parallel_linear_residual(ctx, attn_NHD.reshape({N, H_ * D_}), w.wo_CHD, x_NC, h_NC, ctx.sp_full(N));
}

void AttentionBlock::forward_paged(const LayerContext& ctx, const PagedBatch& batch, const AttentionParams& w,
                                   TensorView x_NC, TensorView h_NC, AttentionSaved& scratch,
                                   const PagedLayerCache& cache) const {
  RF_CHECK(!ctx.parallel.sequence_parallel(), "forward_paged: the rollout runs without sequence parallel");
  const auto& k = ctx.kernels;
  const int64_t N = batch.num_tokens();
  const Projected p = project_qkv(ctx, N, N, w, x_NC, scratch, scratch);
  // The cache holds rotated keys, so each is rotated once, when written.
  k.rope_forward(rope_, batch.positions_N, p.q_NHD);
  k.rope_forward(rope_, batch.positions_N, p.k_NKD);
  k.kv_cache_write(p.k_NKD, p.v_NKD, batch.slot_mapping_N, cache.keys_PZKD, cache.values_PZKD);
  TensorView attn_NHD = rows(scratch.attn_NHD, N);
  k.paged_attention_forward({.query_start = batch.query_start, .context_len = batch.context_len,
                             .block_table_SW = batch.block_table_SW},
                            p.q_NHD, cache.keys_PZKD, cache.values_PZKD, attn_NHD);
  row_parallel_linear_residual(ctx, attn_NHD.reshape({N, H_ * D_}), w.wo_CHD, x_NC, h_NC, TensorView());
}

void AttentionBlock::backward(const LayerContext& ctx, const BatchShape& shape, const AttentionParams& w,
                              const AttentionParams& g, TensorView x_NC, const AttentionSaved& s,
                              AttentionSaved& d, AttentionScratch& scratch, TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens, B = shape.batch, T = shape.seq_len;
  // Selective recompute: what forward discarded, again from the same inputs by the same kernels.
  if (s.xn_NC.empty()) normed_input(ctx, N, n, w, x_NC, d.xn_NC, d.rstd_N);
  if (s.attn_NHD.empty())
    core_attention(ctx, shape, rows(s.q_NHD, N), rows(s.k_NKD, N), rows(s.v_NKD, N), rows(d.attn_NHD, N), d.lse_BHT,
                   d.paged_order);
  const TensorView dh_NC = row_parallel_output_grad(ctx, dresid_NC, ctx.sp_full(N));

  // o_proj: dattn = dh Wo, dWo += dh^T attn.
  TensorView attn_NHD = rows(held(s.attn_NHD, d.attn_NHD), N);
  TensorView dattn_NHD = rows(scratch.dattn_NHD, N);
  k.linear_dgrad(dh_NC, w.wo_CHD, dattn_NHD.reshape({N, H_ * D_}), Accumulate::overwrite);
  k.linear_wgrad(dh_NC, attn_NHD.reshape({N, H_ * D_}), g.wo_CHD, TensorView(), ctx.linear_weight_grads);

  TensorView q_NHD = rows(s.q_NHD, N), k_NKD = rows(s.k_NKD, N), v_NKD = rows(s.v_NKD, N);
  TensorView dq_NHD = rows(scratch.dq_NHD, N), dk_NKD = rows(scratch.dk_NKD, N), dv_NKD = rows(scratch.dv_NKD, N);
  TensorView lse_BHT = held(s.lse_BHT, d.lse_BHT).view().slice(0, 0, B * H_ * T).reshape({B, H_, T});
  if (shape.context) {
    context_.backward(ctx, *shape.context, q_NHD, k_NKD, v_NKD, attn_NHD, lse_BHT.reshape({B * H_ * T}), dattn_NHD,
                      dq_NHD, dk_NKD, dv_NKD, *ctx.cp_scratch);
  } else {
    kernels::AttentionParams params = attention_params(shape);
    if (k.batch_invariant()) params.rope.reset();  // q and k were saved rotated (forward)
    k.attention_backward(params, q_NHD.reshape({B, T, H_, D_}), k_NKD.reshape({B, T, K_, D_}),
                         v_NKD.reshape({B, T, K_, D_}), attn_NHD.reshape({B, T, H_, D_}), lse_BHT,
                         dattn_NHD.reshape({B, T, H_, D_}), dq_NHD.reshape({B, T, H_, D_}),
                         dk_NKD.reshape({B, T, K_, D_}), dv_NKD.reshape({B, T, K_, D_}));
  }
  if (rotates_first(ctx, shape)) {
    k.rope_backward(rope_, shape.positions_N, dq_NHD);
    k.rope_backward(rope_, shape.positions_N, dk_NKD);
  }

  TensorView dq_proj = dq_NHD, dk_proj = dk_NKD;
  if (qk_norm_) {
    dq_proj = rows(scratch.dq_raw_NHD, N);
    dk_proj = rows(scratch.dk_raw_NKD, N);
    const kernels::RmsNormSaved q_saved{rows(s.rstd_q_NH, N).reshape({N * H_})};
    const kernels::RmsNormSaved k_saved{rows(s.rstd_k_NK, N).reshape({N * K_})};
    k.rmsnorm_backward({eps_}, dq_NHD.reshape({N * H_, D_}), rows(s.q_raw_NHD, N).reshape({N * H_, D_}),
                       w.q_norm_w_D, q_saved, dq_proj.reshape({N * H_, D_}), g.q_norm_w_D, Accumulate::overwrite);
    k.rmsnorm_backward({eps_}, dk_NKD.reshape({N * K_, D_}), rows(s.k_raw_NKD, N).reshape({N * K_, D_}),
                       w.k_norm_w_D, k_saved, dk_proj.reshape({N * K_, D_}), g.k_norm_w_D, Accumulate::overwrite);
  }

  // q/k/v projections: dxn = dq Wq + dk Wk + dv Wv; weight (and bias) grads +=.
  TensorView xn_NC = rows(held(s.xn_NC, d.xn_NC), N), dxn_NC = rows(scratch.dxn_NC, N);
  const TensorView dq_2d = dq_proj.reshape({N, H_ * D_}), dk_2d = dk_proj.reshape({N, K_ * D_}),
                   dv_2d = dv_NKD.reshape({N, K_ * D_});
  k.linear_dgrad(dq_2d, w.wq_HDC, dxn_NC, Accumulate::overwrite);
  k.linear_dgrad(dk_2d, w.wk_KDC, dxn_NC, Accumulate::add);
  k.linear_dgrad(dv_2d, w.wv_KDC, dxn_NC, Accumulate::add);
  k.linear_wgrad(dq_2d, xn_NC, g.wq_HDC, g.bq_HD, ctx.linear_weight_grads);
  k.linear_wgrad(dk_2d, xn_NC, g.wk_KDC, g.bk_KD, ctx.linear_weight_grads);
  k.linear_wgrad(dv_2d, xn_NC, g.wv_KDC, g.bv_KD, ctx.linear_weight_grads);
  const TensorView dxn_local = leave_column_parallel_backward(ctx, dxn_NC, ctx.sp_local(n));

  const kernels::RmsNormSaved norm_saved{rows(held(s.rstd_N, d.rstd_N), n)};
  k.rmsnorm_backward({eps_}, dxn_local, x_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C, Accumulate::add);
}

}  // namespace rf::model
