#include "model/mlp_block.h"

#include "model/param_layout.h"
#include "model/param_store.h"
#include "model/tp_region.h"

namespace rf::model {
namespace {

using kernels::Accumulate;

}  // namespace

template <class Store>
MlpParams MlpParams::bind(const Store& s, int64_t l) {
  return MlpParams{s.get(layer_param_name(l, "post_attention_layernorm.weight")),
                   s.get(layer_param_name(l, "mlp.gate_proj.weight")), s.get(layer_param_name(l, "mlp.up_proj.weight")),
                   s.get(layer_param_name(l, "mlp.down_proj.weight"))};
}
template MlpParams MlpParams::bind<ParamStore>(const ParamStore&, int64_t);
template MlpParams MlpParams::bind<GradBuffer>(const GradBuffer&, int64_t);

MlpBlock::MlpBlock(const ModelConfig& c, int64_t tp_size)
    : eps_(c.rms_norm_eps), C_(c.hidden_size), F_(c.intermediate_size / tp_size) {}

void MlpBlock::reserve(MlpSaved& s, int64_t N, DType dtype, TensorAccount a) const {
  s.xn_NC = Tensor({N, C_}, dtype, a);
  s.rstd_N = Tensor({N}, dtype == DType::f64 ? DType::f64 : DType::f32, a);
  s.gate_NF = Tensor({N, F_}, dtype, a);
  s.up_NF = Tensor({N, F_}, dtype, a);
  s.act_NF = Tensor({N, F_}, dtype, a);
}

void MlpBlock::reserve(MlpScratch& s, int64_t N, DType dtype, TensorAccount a) const {
  s.dxn_NC = Tensor({N, C_}, dtype, a);
  s.dgate_NF = Tensor({N, F_}, dtype, a);
  s.dup_NF = Tensor({N, F_}, dtype, a);
  s.dact_NF = Tensor({N, F_}, dtype, a);
}

void MlpBlock::forward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, TensorView h_NC,
                       TensorView y_NC, MlpSaved& s) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  // h and y are this rank's n rows of the residual stream; gate, up and act cover all N tokens.
  TensorView xn_local = ctx.parallel.sequence_parallel() ? ctx.sp_local(n) : rows(s.xn_NC, N);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_forward({eps_}, h_NC, w.norm_w_C, xn_local, norm_saved);
  const TensorView xn_NC = enter_column_parallel(ctx, xn_local, rows(s.xn_NC, N));
  TensorView gate_NF = rows(s.gate_NF, N), up_NF = rows(s.up_NF, N), act_NF = rows(s.act_NF, N);
  k.linear_forward(xn_NC, w.wg_FC, TensorView(), gate_NF);
  k.linear_forward(xn_NC, w.wu_FC, TensorView(), up_NF);
  k.swiglu_forward(gate_NF, up_NF, act_NF);
  // y = h + a Wd^T: residual added in the GEMM's epilogue (tp_region.h).
  row_parallel_linear_residual(ctx, act_NF, w.wd_CF, h_NC, y_NC, ctx.sp_full(N));
}

void MlpBlock::backward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, const MlpParams& g,
                        TensorView h_NC, const MlpSaved& s, MlpScratch& scratch, TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  const TensorView dy_NC = row_parallel_output_grad(ctx, dresid_NC, ctx.sp_full(N));
  TensorView dact_NF = rows(scratch.dact_NF, N);
  k.linear_dgrad(dy_NC, w.wd_CF, dact_NF, Accumulate::overwrite);
  k.linear_wgrad(dy_NC, rows(s.act_NF, N), g.wd_CF, TensorView(), ctx.linear_weight_grads);

  TensorView gate_NF = rows(s.gate_NF, N), up_NF = rows(s.up_NF, N);
  TensorView dgate_NF = rows(scratch.dgate_NF, N), dup_NF = rows(scratch.dup_NF, N);
  k.swiglu_backward(gate_NF, up_NF, dact_NF, dgate_NF, dup_NF);

  TensorView xn_NC = rows(s.xn_NC, N), dxn_NC = rows(scratch.dxn_NC, N);
  k.linear_dgrad(dgate_NF, w.wg_FC, dxn_NC, Accumulate::overwrite);
  k.linear_dgrad(dup_NF, w.wu_FC, dxn_NC, Accumulate::add);
  k.linear_wgrad(dgate_NF, xn_NC, g.wg_FC, TensorView(), ctx.linear_weight_grads);
  k.linear_wgrad(dup_NF, xn_NC, g.wu_FC, TensorView(), ctx.linear_weight_grads);
  const TensorView dxn_local = leave_column_parallel_backward(ctx, dxn_NC, ctx.sp_local(n));

  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, n)};
  k.rmsnorm_backward({eps_}, dxn_local, h_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C, Accumulate::add);
}

}  // namespace rf::model
