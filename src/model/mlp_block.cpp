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

std::vector<SavedTensorSpec<MlpSaved>> MlpBlock::saved_tensors(int64_t N, DType dtype,
                                                               const SelectiveRecompute& discard) const {
  const DType stat = dtype == DType::f64 ? DType::f64 : DType::f32;
  const bool norm = discard.layernorm || discard.mlp;
  using S = MlpSaved;
  return {{"mlp norm output", &S::xn_NC, {N, C_}, dtype, norm},
          {"mlp norm rstd", &S::rstd_N, {N}, stat, norm},
          {"gate", &S::gate_NF, {N, F_}, dtype, discard.mlp},
          {"up", &S::up_NF, {N, F_}, dtype, discard.mlp},
          {"swiglu product", &S::act_NF, {N, F_}, dtype, discard.activation || discard.mlp}};
}

void MlpBlock::reserve(MlpSaved& s, int64_t N, DType dtype, TensorAccount a, const SelectiveRecompute& discard,
                       SavedPart part) const {
  allocate(saved_tensors(N, dtype, discard), part, s, a);
}

void MlpBlock::reserve(MlpScratch& s, int64_t N, DType dtype, TensorAccount a) const {
  s.dxn_NC = Tensor({N, C_}, dtype, a);
  s.dgate_NF = Tensor({N, F_}, dtype, a);
  s.dup_NF = Tensor({N, F_}, dtype, a);
  s.dact_NF = Tensor({N, F_}, dtype, a);
}

void MlpBlock::forward_to_product(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w,
                                  TensorView h_NC, const MlpSaved& s, MlpSaved& d, bool only_discarded) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  // h is this rank's n rows of the residual stream; gate, up and act cover all N tokens.
  const TensorView xn_NC = rows(held(s.xn_NC, d.xn_NC), N);
  if (!only_discarded || s.xn_NC.empty()) {
    TensorView xn_local = ctx.parallel.sequence_parallel() ? ctx.sp_local(n) : xn_NC;
    kernels::RmsNormSaved norm_saved{rows(held(s.rstd_N, d.rstd_N), n)};
    k.rmsnorm_forward({eps_}, h_NC, w.norm_w_C, xn_local, norm_saved);
    enter_column_parallel(ctx, xn_local, xn_NC);
  }
  const TensorView gate_NF = rows(held(s.gate_NF, d.gate_NF), N), up_NF = rows(held(s.up_NF, d.up_NF), N);
  if (!only_discarded || s.gate_NF.empty()) {
    k.linear_forward(xn_NC, w.wg_FC, TensorView(), gate_NF);
    k.linear_forward(xn_NC, w.wu_FC, TensorView(), up_NF);
  }
  if (!only_discarded || s.act_NF.empty()) k.swiglu_forward(gate_NF, up_NF, rows(held(s.act_NF, d.act_NF), N));
}

void MlpBlock::forward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, TensorView h_NC,
                       TensorView y_NC, MlpSaved& s, MlpSaved& d) const {
  const int64_t N = shape.num_tokens();
  forward_to_product(ctx, shape, w, h_NC, s, d, false);
  // y = h + a Wd^T: residual added in the GEMM's epilogue (tp_region.h).
  row_parallel_linear_residual(ctx, rows(held(s.act_NF, d.act_NF), N), w.wd_CF, h_NC, y_NC, ctx.sp_full(N));
}

void MlpBlock::backward(const LayerContext& ctx, const BatchShape& shape, const MlpParams& w, const MlpParams& g,
                        TensorView h_NC, const MlpSaved& s, MlpSaved& d, MlpScratch& scratch,
                        TensorView dresid_NC) const {
  const auto& k = ctx.kernels;
  const int64_t N = shape.num_tokens(), n = shape.local_tokens;
  // Selective recompute: what forward discarded, again from the same inputs by the same kernels.
  forward_to_product(ctx, shape, w, h_NC, s, d, true);
  const TensorView dy_NC = row_parallel_output_grad(ctx, dresid_NC, ctx.sp_full(N));
  TensorView dact_NF = rows(scratch.dact_NF, N);
  k.linear_dgrad(dy_NC, w.wd_CF, dact_NF, Accumulate::overwrite);
  k.linear_wgrad(dy_NC, rows(held(s.act_NF, d.act_NF), N), g.wd_CF, TensorView(), ctx.linear_weight_grads);

  TensorView gate_NF = rows(held(s.gate_NF, d.gate_NF), N), up_NF = rows(held(s.up_NF, d.up_NF), N);
  TensorView dgate_NF = rows(scratch.dgate_NF, N), dup_NF = rows(scratch.dup_NF, N);
  k.swiglu_backward(gate_NF, up_NF, dact_NF, dgate_NF, dup_NF);

  TensorView xn_NC = rows(held(s.xn_NC, d.xn_NC), N), dxn_NC = rows(scratch.dxn_NC, N);
  k.linear_dgrad(dgate_NF, w.wg_FC, dxn_NC, Accumulate::overwrite);
  k.linear_dgrad(dup_NF, w.wu_FC, dxn_NC, Accumulate::add);
  k.linear_wgrad(dgate_NF, xn_NC, g.wg_FC, TensorView(), ctx.linear_weight_grads);
  k.linear_wgrad(dup_NF, xn_NC, g.wu_FC, TensorView(), ctx.linear_weight_grads);
  const TensorView dxn_local = leave_column_parallel_backward(ctx, dxn_NC, ctx.sp_local(n));

  const kernels::RmsNormSaved norm_saved{rows(held(s.rstd_N, d.rstd_N), n)};
  k.rmsnorm_backward({eps_}, dxn_local, h_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C, Accumulate::add);
}

}  // namespace rf::model
