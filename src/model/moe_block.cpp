#include "model/moe_block.h"

#include "core/element_access.h"
#include "model/moe_rows.h"
#include "model/param_layout.h"
#include "model/param_store.h"

namespace rf::model {
namespace {

using kernels::Accumulate;

// The layout packs a layer's E experts' `proj` weights one after the other (param_layout.h): one [E, O, I] tensor
// starting at expert 0's.
template <class Store>
TensorView experts_weight(const Store& s, int64_t l, int64_t E, const char* proj) {
  const TensorView first = s.get(expert_param_name(l, 0, proj));
  const TensorView last = s.get(expert_param_name(l, E - 1, proj));
  RF_CHECK(static_cast<const char*>(last.raw()) ==
               static_cast<const char*>(first.raw()) + size_t(E - 1) * first.nbytes(),
           "layer {}: the experts' {} weights are not packed into one tensor", l, proj);
  return TensorView(first.raw(), first.dtype(), Shape{E, first.size(0), first.size(1)});
}

template <class Store>
TensorView optional_param(const Store& s, int64_t l, const char* suffix, bool present) {
  return present ? s.get(layer_param_name(l, suffix)) : TensorView();
}

// Each routed row's weight, in the rows' expert-major order: row j of expert e has probs_NE[sorted[j], e].
void gather_row_probs(const MoeSaved& s, int64_t N, int64_t E, int64_t J) {
  const int64_t* sorted = s.sorted_J.data<int64_t>();
  const int64_t* counts = s.tokens_per_expert_E.data<int64_t>();
  const TensorView probs = rows(s.probs_NE, N), probs_J = rows(s.probs_J, J);
  for (int64_t e = 0, j = 0; e < E; ++e)
    for (int64_t end = j + counts[e]; j < end; ++j) store_f64(probs_J, j, load_f64(probs, sorted[j] * E + e));
}

// dprobs_NE (zero but at the routed entries) from each row's weight gradient: the inverse of gather_row_probs.
void scatter_row_grads(const MoeSaved& s, const MoeScratch& scratch, int64_t N, int64_t E, int64_t J) {
  const int64_t* sorted = s.sorted_J.data<int64_t>();
  const int64_t* counts = s.tokens_per_expert_E.data<int64_t>();
  const TensorView dprobs = rows(scratch.dprobs_NE, N), dprobs_J = rows(scratch.dprobs_J, J);
  fill_zero(dprobs);
  for (int64_t e = 0, j = 0; e < E; ++e)
    for (int64_t end = j + counts[e]; j < end; ++j) store_f64(dprobs, sorted[j] * E + e, load_f64(dprobs_J, j));
}

// The sigmoid of the shared expert's gate logits, [N, 1] in the weights' dtype, into the statistics dtype.
void sigmoid_rows(TensorView logits_N1, TensorView out_N) {
  for (int64_t n = 0; n < out_N.size(0); ++n) store_f64(out_N, n, 1.0 / (1.0 + std::exp(-load_f64(logits_N1, n))));
}

}  // namespace

MoeBlockConfig MoeBlockConfig::from_model(const ModelConfig& c) {
  return MoeBlockConfig{.router = c.moe.router(),
                        .hidden = c.hidden_size,
                        .expert_ffn = c.moe.moe_intermediate_size,
                        .shared_ffn = c.moe.shared_expert_intermediate_size,
                        .shared_gate = c.moe.shared_expert_gate,
                        .rms_norm_eps = c.rms_norm_eps};
}

template <class Store>
MoeParams MoeParams::bind(const Store& s, int64_t l, const ModelConfig& c) {
  const int64_t E = c.moe.num_experts;
  const bool shared = c.moe.shared_expert_intermediate_size > 0;
  return MoeParams{.norm_w_C = s.get(layer_param_name(l, "post_attention_layernorm.weight")),
                   .router_EC = s.get(layer_param_name(l, "mlp.gate.weight")),
                   .expert_bias_E = TensorView(),
                   .wg_EFC = experts_weight(s, l, E, "gate_proj"),
                   .wu_EFC = experts_weight(s, l, E, "up_proj"),
                   .wd_ECF = experts_weight(s, l, E, "down_proj"),
                   .shared_wg_SC = optional_param(s, l, "mlp.shared_expert.gate_proj.weight", shared),
                   .shared_wu_SC = optional_param(s, l, "mlp.shared_expert.up_proj.weight", shared),
                   .shared_wd_CS = optional_param(s, l, "mlp.shared_expert.down_proj.weight", shared),
                   .shared_gate_1C = optional_param(s, l, "mlp.shared_expert_gate.weight", c.moe.shared_expert_gate)};
}
template MoeParams MoeParams::bind<ParamStore>(const ParamStore&, int64_t, const ModelConfig&);
template MoeParams MoeParams::bind<GradBuffer>(const GradBuffer&, int64_t, const ModelConfig&);

MoeBlock::MoeBlock(const MoeBlockConfig& config) : config_(config) { config_.router.validate(""); }

void MoeBlock::reserve(MoeSaved& s, int64_t N, DType dtype, TensorAccount a) const {
  const DType stat = stat_dtype_for(dtype);
  const int64_t C = config_.hidden, E = config_.router.num_experts, J = N * config_.router.top_k;
  const int64_t F = config_.expert_ffn, S = config_.shared_ffn;
  s.xn_NC = Tensor({N, C}, dtype, a);
  s.rstd_N = Tensor({N}, stat, a);
  s.logits_NE = Tensor({N, E}, stat, a);
  s.probs_NE = Tensor({N, E}, stat, a);
  s.routing_map_NE = Tensor({N, E}, DType::u8, a);
  s.router.scores_TE = Tensor({N, E}, DType::f64, a);
  s.sorted_J = Tensor({J}, DType::i64, a);
  s.tokens_per_expert_E = Tensor({E}, DType::i64, a);
  s.probs_J = Tensor({J}, stat, a);
  s.permuted_JC = Tensor({J, C}, dtype, a);
  for (Tensor* t : {&s.gate_JF, &s.up_JF, &s.act_JF}) *t = Tensor({J, F}, dtype, a);
  if (S == 0) return;
  for (Tensor* t : {&s.shared_gate_NS, &s.shared_up_NS, &s.shared_act_NS}) *t = Tensor({N, S}, dtype, a);
  s.shared_out_NC = Tensor({N, C}, dtype, a);
  s.shared_scale_N = Tensor({N}, stat, a);
}

int64_t MoeBlock::saved_bytes(int64_t N, DType dtype) const {
  MoeSaved s;
  reserve(s, N, dtype, TensorAccount{});
  int64_t bytes = 0;
  s.for_each_tensor([&bytes](Tensor& t) { bytes += int64_t(t.allocated_bytes()); });
  return bytes;
}

void MoeBlock::reserve(MoeScratch& s, int64_t N, DType dtype, TensorAccount a) const {
  const DType stat = stat_dtype_for(dtype);
  const int64_t C = config_.hidden, E = config_.router.num_experts, J = N * config_.router.top_k;
  const int64_t F = config_.expert_ffn, S = config_.shared_ffn;
  for (Tensor* t : {&s.dy_JC, &s.dpermuted_JC}) *t = Tensor({J, C}, dtype, a);
  for (Tensor* t : {&s.scaled_act_JF, &s.dscaled_JF, &s.dact_JF, &s.dgate_JF, &s.dup_JF})
    *t = Tensor({J, F}, dtype, a);
  s.dprobs_J = Tensor({J}, stat, a);
  s.dprobs_NE = Tensor({N, E}, stat, a);
  s.dlogits_NE = Tensor({N, E}, stat, a);
  if (stat != dtype)
    for (Tensor* t : {&s.dlogits_cast_NE, &s.logits_cast_NE}) *t = Tensor({N, E}, dtype, a);
  s.dxn_NC = Tensor({N, C}, dtype, a);
  if (S == 0) return;
  s.dshared_out_NC = Tensor({N, C}, dtype, a);
  for (Tensor* t : {&s.dshared_act_NS, &s.dshared_gate_NS, &s.dshared_up_NS}) *t = Tensor({N, S}, dtype, a);
  s.dshared_scale_N = Tensor({N}, stat, a);
  s.shared_logit_N1 = Tensor({N, 1}, dtype, a);
}

void MoeBlock::forward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, TensorView h_NC,
                       TensorView y_NC, MoeSaved& s, MoeScratch& scratch, TensorView replay_experts_Nk) const {
  const int64_t N = shape.num_tokens();
  const TensorView xn_NC = rows(s.xn_NC, N);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  ctx.kernels.rmsnorm_forward({config_.rms_norm_eps}, h_NC, w.norm_w_C, xn_NC, norm_saved);
  copy_convert(h_NC, y_NC);
  forward_experts(ctx, w, xn_NC, y_NC, s, scratch, replay_experts_Nk);
}

void MoeBlock::backward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, const MoeParams& g,
                        TensorView h_NC, MoeSaved& s, MoeScratch& scratch, TensorView dresid_NC,
                        TensorView dlogits_extra_NE) const {
  const int64_t N = shape.num_tokens();
  const TensorView dxn_NC = rows(scratch.dxn_NC, N);
  backward_experts(ctx, w, g, rows(s.xn_NC, N), s, scratch, dresid_NC, dxn_NC, dlogits_extra_NE);
  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  ctx.kernels.rmsnorm_backward({config_.rms_norm_eps}, dxn_NC, h_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C,
                               Accumulate::add);
}

void MoeBlock::forward_experts(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, TensorView y_NC,
                               MoeSaved& s, MoeScratch& scratch, TensorView replay_experts_Nk) const {
  const auto& k = ctx.kernels;
  const int64_t N = xn_NC.size(0), E = config_.router.num_experts, J = N * config_.router.top_k;
  s.routed_rows = J;
  const TensorView logits_NE = rows(s.logits_NE, N);
  if (scratch.logits_cast_NE.empty()) {
    k.linear_forward(xn_NC, w.router_EC, TensorView(), logits_NE);
  } else {  // bf16 weights: the gate's GEMM in bf16 as HF's, the routing on its f32 values
    k.linear_forward(xn_NC, w.router_EC, TensorView(), rows(scratch.logits_cast_NE, N));
    copy_convert(rows(scratch.logits_cast_NE, N), logits_NE);
  }
  const TensorView probs_NE = rows(s.probs_NE, N), map_NE = rows(s.routing_map_NE, N);
  if (replay_experts_Nk.empty())
    route_forward(config_.router, logits_NE, w.expert_bias_E, probs_NE, map_NE, s.router);
  else
    route_forward_replayed(config_.router, logits_NE, w.expert_bias_E, replay_experts_Nk, probs_NE, map_NE, s.router);

  const TensorView sorted_J = rows(s.sorted_J, J), permuted_JC = rows(s.permuted_JC, J);
  k.moe_permute(xn_NC, map_NE, TensorView(), permuted_JC, TensorView(), sorted_J, s.tokens_per_expert_E);
  gather_row_probs(s, N, E, J);
  const std::span<const int64_t> sizes(s.tokens_per_expert_E.data<int64_t>(), size_t(E));
  const TensorView gate_JF = rows(s.gate_JF, J), up_JF = rows(s.up_JF, J), act_JF = rows(s.act_JF, J);
  k.grouped_gemm_forward(permuted_JC, w.wg_EFC, sizes, gate_JF);
  k.grouped_gemm_forward(permuted_JC, w.wu_EFC, sizes, up_JF);
  k.swiglu_forward(gate_JF, up_JF, act_JF);
  const TensorView scaled_JF = rows(scratch.scaled_act_JF, J), down_JC = rows(scratch.dy_JC, J);
  scale_rows(act_JF, rows(s.probs_J, J), scaled_JF);
  k.grouped_gemm_forward(scaled_JF, w.wd_ECF, sizes, down_JC);
  k.moe_unpermute(down_JC, sorted_J, y_NC, Accumulate::add);
  if (config_.shared_ffn == 0) return;

  const TensorView sg_NS = rows(s.shared_gate_NS, N), su_NS = rows(s.shared_up_NS, N);
  const TensorView sact_NS = rows(s.shared_act_NS, N), sout_NC = rows(s.shared_out_NC, N);
  const TensorView scale_N = rows(s.shared_scale_N, N);
  k.linear_forward(xn_NC, w.shared_wg_SC, TensorView(), sg_NS);
  k.linear_forward(xn_NC, w.shared_wu_SC, TensorView(), su_NS);
  k.swiglu_forward(sg_NS, su_NS, sact_NS);
  k.linear_forward(sact_NS, w.shared_wd_CS, TensorView(), sout_NC);
  if (config_.shared_gate) {
    const TensorView logit_N1 = rows(scratch.shared_logit_N1, N);
    k.linear_forward(xn_NC, w.shared_gate_1C, TensorView(), logit_N1);
    sigmoid_rows(logit_N1, scale_N);
  } else {
    for (int64_t n = 0; n < N; ++n) store_f64(scale_N, n, 1.0);
  }
  add_scaled_rows(sout_NC, scale_N, y_NC);
}

void MoeBlock::backward_experts(const LayerContext& ctx, const MoeParams& w, const MoeParams& g, TensorView xn_NC,
                                MoeSaved& s, MoeScratch& scratch, TensorView dy_NC, TensorView dxn_NC,
                                TensorView dlogits_extra_NE) const {
  const auto& k = ctx.kernels;
  const Accumulate wgrad_mode = ctx.linear_weight_grads;
  const int64_t N = xn_NC.size(0), E = config_.router.num_experts, J = s.routed_rows;
  const std::span<const int64_t> sizes(s.tokens_per_expert_E.data<int64_t>(), size_t(E));
  const TensorView sorted_J = rows(s.sorted_J, J), probs_J = rows(s.probs_J, J);
  const TensorView act_JF = rows(s.act_JF, J), permuted_JC = rows(s.permuted_JC, J);

  // Down projection: its input is each row's activation times its weight, recomputed from the kept activation.
  const TensorView dy_JC = rows(scratch.dy_JC, J), scaled_JF = rows(scratch.scaled_act_JF, J);
  const TensorView dscaled_JF = rows(scratch.dscaled_JF, J), dact_JF = rows(scratch.dact_JF, J);
  k.moe_gather(dy_NC, sorted_J, dy_JC);
  scale_rows(act_JF, probs_J, scaled_JF);
  k.grouped_gemm_dgrad(dy_JC, w.wd_ECF, sizes, dscaled_JF, Accumulate::overwrite);
  k.grouped_gemm_wgrad(dy_JC, scaled_JF, sizes, g.wd_ECF, wgrad_mode);
  const TensorView dprobs_J = rows(scratch.dprobs_J, J);
  row_dots(dscaled_JF, act_JF, dprobs_J);
  scale_rows(dscaled_JF, probs_J, dact_JF);

  const TensorView dgate_JF = rows(scratch.dgate_JF, J), dup_JF = rows(scratch.dup_JF, J);
  k.swiglu_backward(rows(s.gate_JF, J), rows(s.up_JF, J), dact_JF, dgate_JF, dup_JF);
  const TensorView dpermuted_JC = rows(scratch.dpermuted_JC, J);
  k.grouped_gemm_dgrad(dgate_JF, w.wg_EFC, sizes, dpermuted_JC, Accumulate::overwrite);
  k.grouped_gemm_dgrad(dup_JF, w.wu_EFC, sizes, dpermuted_JC, Accumulate::add);
  k.grouped_gemm_wgrad(dgate_JF, permuted_JC, sizes, g.wg_EFC, wgrad_mode);
  k.grouped_gemm_wgrad(dup_JF, permuted_JC, sizes, g.wu_EFC, wgrad_mode);
  k.moe_unpermute(dpermuted_JC, sorted_J, dxn_NC, Accumulate::overwrite);

  // The router: the weights' gradients back to the logits (the choice has none), plus the balancing losses'.
  scatter_row_grads(s, scratch, N, E, J);
  const TensorView dlogits_NE = rows(scratch.dlogits_NE, N);
  route_backward(config_.router, s.router, rows(s.routing_map_NE, N), rows(scratch.dprobs_NE, N), dlogits_NE);
  if (!dlogits_extra_NE.empty())
    for (int64_t i = 0; i < N * E; ++i)
      store_f64(dlogits_NE, i, load_f64(dlogits_NE, i) + load_f64(dlogits_extra_NE, i));
  TensorView dlogits_cast_NE = dlogits_NE;
  if (!scratch.dlogits_cast_NE.empty()) {
    dlogits_cast_NE = rows(scratch.dlogits_cast_NE, N);
    copy_convert(dlogits_NE, dlogits_cast_NE);
  }
  k.linear_dgrad(dlogits_cast_NE, w.router_EC, dxn_NC, Accumulate::add);
  k.linear_wgrad(dlogits_cast_NE, xn_NC, g.router_EC, TensorView(), wgrad_mode);
  if (config_.shared_ffn == 0) return;

  const TensorView sout_NC = rows(s.shared_out_NC, N), scale_N = rows(s.shared_scale_N, N);
  const TensorView dsout_NC = rows(scratch.dshared_out_NC, N);
  scale_rows(dy_NC, scale_N, dsout_NC);
  if (config_.shared_gate) {  // d logit = (dy . shared_out) s (1 - s)
    const TensorView dscale_N = rows(scratch.dshared_scale_N, N);
    const TensorView dlogit_N1 = rows(scratch.shared_logit_N1, N);
    row_dots(dy_NC, sout_NC, dscale_N);
    for (int64_t n = 0; n < N; ++n) {
      const double sg = load_f64(scale_N, n);
      store_f64(dlogit_N1, n, load_f64(dscale_N, n) * sg * (1.0 - sg));
    }
    k.linear_dgrad(dlogit_N1, w.shared_gate_1C, dxn_NC, Accumulate::add);
    k.linear_wgrad(dlogit_N1, xn_NC, g.shared_gate_1C, TensorView(), wgrad_mode);
  }
  const TensorView dsact_NS = rows(scratch.dshared_act_NS, N), sact_NS = rows(s.shared_act_NS, N);
  k.linear_dgrad(dsout_NC, w.shared_wd_CS, dsact_NS, Accumulate::overwrite);
  k.linear_wgrad(dsout_NC, sact_NS, g.shared_wd_CS, TensorView(), wgrad_mode);
  const TensorView dsg_NS = rows(scratch.dshared_gate_NS, N), dsu_NS = rows(scratch.dshared_up_NS, N);
  k.swiglu_backward(rows(s.shared_gate_NS, N), rows(s.shared_up_NS, N), dsact_NS, dsg_NS, dsu_NS);
  k.linear_dgrad(dsg_NS, w.shared_wg_SC, dxn_NC, Accumulate::add);
  k.linear_dgrad(dsu_NS, w.shared_wu_SC, dxn_NC, Accumulate::add);
  k.linear_wgrad(dsg_NS, xn_NC, g.shared_wg_SC, TensorView(), wgrad_mode);
  k.linear_wgrad(dsu_NS, xn_NC, g.shared_wu_SC, TensorView(), wgrad_mode);
}

}  // namespace rf::model
