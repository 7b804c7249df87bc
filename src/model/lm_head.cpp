#include "model/lm_head.h"

#include "model/param_store.h"

namespace rf::model {
namespace {

TensorView rows(const Tensor& t, int64_t n) { return t.view().slice(0, 0, n); }

}  // namespace

template <class Store>
LmHeadParams LmHeadParams::bind(const Store& s, const ModelConfig& c) {
  return LmHeadParams{s.get("model.norm.weight"),
                      s.get(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight")};
}
template LmHeadParams LmHeadParams::bind<ParamStore>(const ParamStore&, const ModelConfig&);
template LmHeadParams LmHeadParams::bind<GradBuffer>(const GradBuffer&, const ModelConfig&);

LmHead::LmHead(const ModelConfig& c) : eps_(c.rms_norm_eps), C_(c.hidden_size), V_(c.vocab_size) {}

void LmHead::reserve(LmHeadSaved& s, LmHeadScratch& scratch, int64_t N, DType dtype, TensorAccount activations,
                     TensorAccount workspace) const {
  const DType stat = stat_dtype_for(dtype);
  s.xf_NC = Tensor({N, C_}, dtype, activations);
  s.rstd_N = Tensor({N}, stat, activations);
  s.logits_NV = Tensor({N, V_}, dtype, activations);
  s.logp_N = Tensor({N}, stat, activations);
  s.entropy_N = Tensor({N}, stat, activations);
  s.lse_N = Tensor({N}, stat, activations);
  scratch.dlogits_NV = Tensor({N, V_}, dtype, workspace);
  scratch.dxf_NC = Tensor({N, C_}, dtype, workspace);
}

void LmHead::forward(const LayerContext& ctx, int64_t N, const LmHeadParams& w, TensorView x_NC, TensorView targets_N,
                     double temperature, bool with_entropy, LmHeadSaved& s) const {
  const auto& k = ctx.kernels;
  TensorView xf_NC = rows(s.xf_NC, N), logits_NV = rows(s.logits_NV, N);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  k.rmsnorm_forward({eps_}, x_NC, w.norm_w_C, xf_NC, norm_saved);
  k.linear_forward(xf_NC, w.w_VC, TensorView(), logits_NV);
  k.logprob_forward({temperature, 0}, logits_NV, targets_N, rows(s.logp_N, N),
                    with_entropy ? rows(s.entropy_N, N) : TensorView(), rows(s.lse_N, N));
}

void LmHead::backward(const LayerContext& ctx, int64_t N, const LmHeadParams& w, const LmHeadParams& g,
                      TensorView x_NC, TensorView targets_N, double temperature, const LmHeadSaved& s,
                      LmHeadScratch& scratch, TensorView dlogp_N, TensorView dentropy_N, TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  TensorView logits_NV = rows(s.logits_NV, N), dlogits_NV = rows(scratch.dlogits_NV, N);
  k.logprob_backward({temperature, 0}, logits_NV, targets_N, rows(s.lse_N, N),
                     dentropy_N.empty() ? TensorView() : rows(s.entropy_N, N), dlogp_N, dentropy_N, dlogits_NV);
  TensorView xf_NC = rows(s.xf_NC, N), dxf_NC = rows(scratch.dxf_NC, N);
  k.linear_dgrad(dlogits_NV, w.w_VC, dxf_NC, kernels::Accumulate::overwrite);
  k.linear_wgrad(dlogits_NV, xf_NC, g.w_VC, TensorView(), ctx.linear_weight_grads);
  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  k.rmsnorm_backward({eps_}, dxf_NC, x_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C,
                     kernels::Accumulate::overwrite);
}

}  // namespace rf::model
