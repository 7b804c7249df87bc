#include "model/lm_head.h"

#include "kernels/logprob_shards.h"
#include "model/param_store.h"
#include "model/tp_region.h"

namespace rf::model {

template <class Store>
LmHeadParams LmHeadParams::bind(const Store& s, const ModelConfig& c) {
  return LmHeadParams{s.get("model.norm.weight"),
                      s.get(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight")};
}
template LmHeadParams LmHeadParams::bind<ParamStore>(const ParamStore&, const ModelConfig&);
template LmHeadParams LmHeadParams::bind<GradBuffer>(const GradBuffer&, const ModelConfig&);

LmHead::LmHead(const ModelConfig& c, int64_t vocab_columns, int64_t vocab_start)
    : eps_(c.rms_norm_eps), C_(c.hidden_size), V_(vocab_columns), vocab_start_(vocab_start), vocab_size_(c.vocab_size) {}

std::vector<SavedTensorSpec<LmHeadSaved>> LmHead::saved_tensors(int64_t N, DType dtype) const {
  const DType stat = stat_dtype_for(dtype);
  using S = LmHeadSaved;
  return {{"final norm output", &S::xf_NC, {N, C_}, dtype},
          {"final norm rstd", &S::rstd_N, {N}, stat},
          {"logits", &S::logits_NV, {N, V_}, dtype},
          {"logp", &S::logp_N, {N}, stat},
          {"entropy", &S::entropy_N, {N}, stat},
          {"lse", &S::lse_N, {N}, stat}};
}

void LmHead::reserve(LmHeadSaved& s, LmHeadScratch& scratch, int64_t N, int64_t tp_size, DType dtype,
                     TensorAccount activations, TensorAccount workspace) const {
  const DType stat = stat_dtype_for(dtype);
  allocate(saved_tensors(N, dtype), SavedPart::kept, s, activations);
  if (tp_size > 1) {
    s.stats_N4 = Tensor({N, kernels::kNumShardStats}, stat, workspace);
    s.stats_RN4 = Tensor({tp_size, N, kernels::kNumShardStats}, stat, workspace);
  }
  scratch.dlogits_NV = Tensor({N, V_}, dtype, workspace);
  scratch.dxf_NC = Tensor({N, C_}, dtype, workspace);
}

void LmHead::forward(const LayerContext& ctx, const BatchShape& shape, const LmHeadParams& w, TensorView x_NC,
                     TensorView targets_N, double temperature, bool with_entropy, LmHeadSaved& s) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  TensorView logits_NV = rows(s.logits_NV, N);
  TensorView xf_local = ctx.parallel.sequence_parallel() ? ctx.sp_local(n) : rows(s.xf_NC, N);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_forward({eps_}, x_NC, w.norm_w_C, xf_local, norm_saved);
  dist::ProcessGroup& tp = ctx.parallel.tp();
  const TensorView xf_NC = enter_column_parallel(ctx, xf_local, rows(s.xf_NC, N));
  k.linear_forward(xf_NC, w.w_VC, TensorView(), logits_NV);
  const TensorView logp_N = rows(s.logp_N, N), entropy_N = with_entropy ? rows(s.entropy_N, N) : TensorView();
  if (tp.size() == 1) {
    k.logprob_forward(logprob_params(temperature), logits_NV, targets_N, logp_N, entropy_N, rows(s.lse_N, N));
    return;
  }
  const TensorView stats_N4 = rows(s.stats_N4, N);
  k.logprob_shard_stats(logprob_params(temperature), logits_NV, targets_N, stats_N4);
  // All ranks' statistics, rank-major, in the head of the [R, capacity, 4] buffer viewed as [R, N, 4].
  const int64_t gathered_numel = tp.size() * N * kernels::kNumShardStats;
  const TensorView gathered = s.stats_RN4.view().reshape({s.stats_RN4.numel()}).slice(0, 0, gathered_numel);
  tp.all_gather(stats_N4, gathered);
  kernels::combine_logprob_shards(gathered.reshape({tp.size(), N, kernels::kNumShardStats}), targets_N, logp_N,
                                  entropy_N, rows(s.lse_N, N));
}

void LmHead::logits(const LayerContext& ctx, const LmHeadParams& w, TensorView x_RC, TensorView xf_RC,
                    TensorView rstd_R, TensorView logits_RV) const {
  kernels::RmsNormSaved norm_saved{rstd_R};
  ctx.kernels.rmsnorm_forward({eps_}, x_RC, w.norm_w_C, xf_RC, norm_saved);
  const TensorView xf = enter_column_parallel(ctx, xf_RC, TensorView());
  ctx.kernels.linear_forward(xf, w.w_VC, TensorView(), logits_RV);
}

void LmHead::backward(const LayerContext& ctx, const BatchShape& shape, const LmHeadParams& w, const LmHeadParams& g,
                      TensorView x_NC, TensorView targets_N, double temperature, const LmHeadSaved& s,
                      LmHeadScratch& scratch, TensorView dlogp_N, TensorView dentropy_N, TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  TensorView logits_NV = rows(s.logits_NV, N), dlogits_NV = rows(scratch.dlogits_NV, N);
  k.logprob_backward(logprob_params(temperature), logits_NV, targets_N, rows(s.lse_N, N),
                     dentropy_N.empty() ? TensorView() : rows(s.entropy_N, N), dlogp_N, dentropy_N, dlogits_NV);
  TensorView xf_NC = rows(s.xf_NC, N), dxf_NC = rows(scratch.dxf_NC, N);
  k.linear_dgrad(dlogits_NV, w.w_VC, dxf_NC, kernels::Accumulate::overwrite);
  k.linear_wgrad(dlogits_NV, xf_NC, g.w_VC, TensorView(), ctx.linear_weight_grads);
  const TensorView dxf_local = leave_column_parallel_backward(ctx, dxf_NC, ctx.sp_local(n));
  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_backward({eps_}, dxf_local, x_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C,
                     kernels::Accumulate::overwrite);
}

}  // namespace rf::model
