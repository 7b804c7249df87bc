#include "model/value_head.h"

#include "model/param_store.h"

namespace rf::model {
namespace {

// The first of this rank's rows in the micro-batch's N tokens: SP gives rank r rows [r n, (r + 1) n).
int64_t first_local_row(const LayerContext& ctx, const BatchShape& shape) {
  return ctx.parallel.sequence_parallel() ? ctx.parallel.tp().rank() * shape.local_tokens : 0;
}

}  // namespace

template <class Store>
ValueHeadParams ValueHeadParams::bind(const Store& s, const ModelConfig& c) {
  RF_CHECK(c.head != HeadKind::lm, "ValueHeadParams: a {} model has no score head", head_name(c.head));
  return ValueHeadParams{s.get("model.norm.weight"), s.get("score.weight"),
                         c.head == HeadKind::value ? s.get("score.bias") : TensorView()};
}
template ValueHeadParams ValueHeadParams::bind<ParamStore>(const ParamStore&, const ModelConfig&);
template ValueHeadParams ValueHeadParams::bind<GradBuffer>(const GradBuffer&, const ModelConfig&);

ValueHead::ValueHead(const ModelConfig& c) : eps_(c.rms_norm_eps), C_(c.hidden_size) {
  if (c.head != HeadKind::lm && c.num_labels != 1)
    throw ConfigError("id2label", fmt::format("{} labels: rlforge's {} head computes one value per token "
                                              "(num_labels 1)",
                                              c.num_labels, head_name(c.head)));
}

std::vector<SavedTensorSpec<ValueHeadSaved>> ValueHead::saved_tensors(int64_t N, DType dtype) const {
  using S = ValueHeadSaved;
  return {{"final norm output", &S::xf_NC, {N, C_}, dtype},
          {"final norm rstd", &S::rstd_N, {N}, stat_dtype_for(dtype)},
          {"score projection", &S::out_N1, {N, 1}, dtype},
          {"values", &S::values_N, {N}, stat_dtype_for(dtype)}};
}

void ValueHead::reserve(ValueHeadSaved& s, ValueHeadScratch& scratch, int64_t N, DType dtype,
                        TensorAccount activations, TensorAccount workspace) const {
  allocate(saved_tensors(N, dtype), SavedPart::kept, s, activations);
  s.local_values_N = Tensor({N}, stat_dtype_for(dtype), workspace);
  scratch.dout_N1 = Tensor({N, 1}, dtype, workspace);
  scratch.dxf_NC = Tensor({N, C_}, dtype, workspace);
}

void ValueHead::forward(const LayerContext& ctx, const BatchShape& shape, const ValueHeadParams& w, TensorView x_NC,
                        ValueHeadSaved& s) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  const TensorView xf_nC = rows(s.xf_NC, n), out_n1 = rows(s.out_N1, n);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_forward({eps_}, x_NC, w.norm_w_C, xf_nC, norm_saved);
  k.linear_forward(xf_nC, w.w_1C, w.b_1, out_n1);
  if (!ctx.parallel.sequence_parallel()) {
    copy_convert(out_n1.select(1, 0), rows(s.values_N, N));
    return;
  }
  const TensorView local_n = rows(s.local_values_N, n);
  copy_convert(out_n1.select(1, 0), local_n);
  ctx.parallel.tp().all_gather(local_n, rows(s.values_N, N));  // rank-major: the rows in token order
}

void ValueHead::backward(const LayerContext& ctx, const BatchShape& shape, const ValueHeadParams& w,
                         const ValueHeadParams& g, TensorView x_NC, const ValueHeadSaved& s, ValueHeadScratch& scratch,
                         TensorView dvalues_N, TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  const int64_t n = shape.local_tokens;
  const TensorView dout_n1 = rows(scratch.dout_N1, n), dxf_nC = rows(scratch.dxf_NC, n);
  copy_convert(dvalues_N.slice(0, first_local_row(ctx, shape), n), dout_n1.select(1, 0));
  k.linear_dgrad(dout_n1, w.w_1C, dxf_nC, kernels::Accumulate::overwrite);
  k.linear_wgrad(dout_n1, rows(s.xf_NC, n), g.w_1C, g.b_1, ctx.linear_weight_grads);
  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_backward({eps_}, dxf_nC, x_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C,
                     kernels::Accumulate::overwrite);
}

}  // namespace rf::model
