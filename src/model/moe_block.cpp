#include "model/moe_block.h"

#include <algorithm>

#include "core/element_access.h"
#include "core/tensor_allocation.h"
#include "model/moe_rows.h"
#include "model/param_layout.h"
#include "model/param_store.h"
#include "model/tp_region.h"

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

// What the dispatch routes by: the router's probs and map, or with a capacity the kept ones.
TensorView routed_probs(const MoeSaved& s, int64_t N) {
  return rows(s.kept_probs_NE.empty() ? s.probs_NE : s.kept_probs_NE, N);
}
TensorView routed_map(const MoeSaved& s, int64_t N) {
  return rows(s.kept_map_NE.empty() ? s.routing_map_NE : s.kept_map_NE, N);
}

// Each routed row's weight, in the rows' expert-major order: row j of expert e has probs_NE[sorted[j], e].
void gather_row_probs(const MoeSaved& s, TensorView probs, int64_t E, int64_t J) {
  const int64_t* sorted = s.sorted_J.data<int64_t>();
  const int64_t* counts = s.tokens_per_expert_E.data<int64_t>();
  const TensorView probs_J = rows(s.probs_J, J);
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

// The local experts' linear layers (w_EOI: expert e's [O, I]): one grouped GEMM call over all of them
// (moe_grouped_gemm), or Megatron's SequentialMLP, one linear call per expert on its consecutive rows.
struct ExpertGemms {
  const kernels::KernelRegistry& k;
  bool grouped;
  std::span<const int64_t> sizes;

  template <class F>
  void per_expert(F&& f) const {
    for (int64_t e = 0, row = 0; e < int64_t(sizes.size()); row += sizes[size_t(e)], ++e) f(e, row, sizes[size_t(e)]);
  }
  void forward(TensorView x, TensorView w, TensorView y) const {
    if (grouped) return k.grouped_gemm_forward(x, w, sizes, y);
    per_expert([&](int64_t e, int64_t row, int64_t n) {
      if (n > 0) k.linear_forward(x.slice(0, row, n), w.select(0, e), TensorView(), y.slice(0, row, n));
    });
  }
  void dgrad(TensorView dy, TensorView w, TensorView dx, Accumulate mode) const {
    if (grouped) return k.grouped_gemm_dgrad(dy, w, sizes, dx, mode);
    per_expert([&](int64_t e, int64_t row, int64_t n) {
      if (n > 0) k.linear_dgrad(dy.slice(0, row, n), w.select(0, e), dx.slice(0, row, n), mode);
    });
  }
  void wgrad(TensorView dy, TensorView x, TensorView dw, Accumulate mode) const {
    if (grouped) return k.grouped_gemm_wgrad(dy, x, sizes, dw, mode);
    per_expert([&](int64_t e, int64_t row, int64_t n) {
      if (n > 0)
        k.linear_wgrad(dy.slice(0, row, n), x.slice(0, row, n), dw.select(0, e), TensorView(), mode);
      else if (mode == Accumulate::overwrite)  // an expert without rows: its gradient is zero, as the grouped GEMM's
        fill_zero(dw.select(0, e));
    });
  }
};

// The first n entries of a vector as an [n, 1] matrix (the dispatch moves rows).
TensorView as_column(const Tensor& t, int64_t n) { return rows(t, n).reshape({n, 1}); }

// The sigmoid of the shared expert's gate logits, [N, 1] in the weights' dtype, into the statistics dtype.
void sigmoid_rows(TensorView logits_N1, TensorView out_N) {
  for (int64_t n = 0; n < out_N.size(0); ++n) store_f64(out_N, n, 1.0 / (1.0 + std::exp(-load_f64(logits_N1, n))));
}

}  // namespace

MoeBlockConfig MoeBlockConfig::from_model(const ModelConfig& c, const MoeParallel& parallel) {
  return MoeBlockConfig{.router = c.moe.router(),
                        .hidden = c.hidden_size,
                        .expert_ffn = c.moe.moe_intermediate_size / parallel.etp,
                        .shared_ffn = c.moe.shared_expert_intermediate_size / parallel.tp,
                        .shared_gate = c.moe.shared_expert_gate,
                        .rms_norm_eps = c.rms_norm_eps,
                        .parallel = parallel};
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

MoeBlock::MoeBlock(const MoeBlockConfig& config) : config_(config) {
  config_.router.validate("");
  config_.capacity.validate("");
  const MoeParallel& p = config_.parallel;
  RF_CHECK(p.ep >= 1 && config_.router.num_experts % p.ep == 0,
           "expert_model_parallel_size {} does not divide the {} experts", p.ep, config_.router.num_experts);
  RF_CHECK(p.tp >= 1 && (p.etp == 1 || p.etp == p.tp), "expert tensor parallel size {} at TP {}: expected 1 or {}",
           p.etp, p.tp, p.tp);
}

int64_t MoeBlock::max_routed_rows(int64_t N) const {
  const int64_t E = config_.router.num_experts, k = config_.router.top_k;
  if (!config_.capacity.pad_to_capacity) return N * k;
  return std::max(N * k, E * std::min(N, expert_capacity(N, k, E, config_.capacity.capacity_factor)));
}

int64_t MoeBlock::max_expert_rows(int64_t N) const {
  return max_routed_rows(N) * config_.parallel.ep * (config_.parallel.etp_gathers() ? config_.parallel.etp : 1);
}

ExpertExchange MoeBlock::exchange(const LayerContext& ctx, MoeSaved& s) const {
  const MoeParallel& p = config_.parallel;
  dist::ProcessGroup* ep = nullptr;
  dist::ProcessGroup* etp = nullptr;
  if (p.ep > 1) {
    ep = &ctx.parallel.group(dist::GroupKind::ep);
    RF_CHECK(ep->size() == p.ep, "MoE block for {} EP ranks in a group of {}", p.ep, ep->size());
  }
  if (p.etp > 1) {
    // The layout splits the experts by TP rank (param_layout.h): the ETP group must be the TP group.
    etp = &ctx.parallel.group(dist::GroupKind::etp);
    RF_CHECK(etp->size() == p.etp && etp->rank() == ctx.parallel.tp().rank(),
             "MoE block for {} expert-TP ranks: the expert-TP group ({} ranks, this one {}) is not the TP group (this "
             "rank {})",
             p.etp, etp->size(), etp->rank(), ctx.parallel.tp().rank());
  }
  RF_CHECK(p.sequence_parallel == ctx.parallel.sequence_parallel(), "MoE block built {} sequence parallel, run {}",
           p.sequence_parallel ? "with" : "without", ctx.parallel.sequence_parallel() ? "with it" : "without");
  return ExpertExchange(ep, etp, p.sequence_parallel, s.plan, s.etp_plan);
}

dist::ProcessGroup& MoeBlock::token_group(const LayerContext& ctx) const {
  return ctx.parallel.group(config_.parallel.etp_gathers() ? dist::GroupKind::tp_ep : dist::GroupKind::ep);
}

int64_t MoeBlock::first_local_expert(const LayerContext& ctx) const {
  const int64_t ep = config_.parallel.ep;
  return ep == 1 ? 0 : ctx.parallel.group(dist::GroupKind::ep).rank() * (config_.router.num_experts / ep);
}

MoeBlock::ExpertSide MoeBlock::expert_side(const LayerContext& ctx, const MoeSaved& s, const MoeParams& w) const {
  const MoeParallel& p = config_.parallel;
  const int64_t R = s.expert_rows, E_loc = config_.router.num_experts / p.ep, first = first_local_expert(ctx);
  const TensorView x_RC = p.moves_rows() ? rows(s.expert_rows_RC, R) : rows(s.permuted_JC, R);
  const TensorView probs_R = p.moves_rows() ? rows(s.expert_probs_R, R) : rows(s.probs_J, R);
  const std::span<const int64_t> sizes =
      p.gathers_tokens() ? std::span<const int64_t>(s.tokens_per_expert_E.data<int64_t>(), size_t(E_loc))
      : p.etp_gathers()  ? std::span<const int64_t>(s.etp_plan.local_sizes)
                         : std::span<const int64_t>(s.plan.local_sizes);
  return {x_RC, probs_R, sizes, R, w.wg_EFC.slice(0, first, E_loc), w.wu_EFC.slice(0, first, E_loc),
          w.wd_ECF.slice(0, first, E_loc)};
}

void MoeBlock::gather_to_experts(const LayerContext& ctx, MoeSaved& s, MoeScratch& scratch, TensorView xn_NC,
                                 TensorView probs_NE, TensorView map_NE) const {
  dist::ProcessGroup& group = token_group(ctx);
  const int64_t N = xn_NC.size(0), E = config_.router.num_experts, E_loc = E / config_.parallel.ep;
  const int64_t first = first_local_expert(ctx);
  TokenGatherPlan& plan = s.gather_plan;
  plan_token_gather(group, N, plan);
  const int64_t T = plan.total;
  const TensorView tokens_TC = rows(scratch.gathered_TC, T), map_TE = rows(scratch.gathered_map_TE, T);
  const TensorView probs_TE = rows(scratch.gathered_probs_TE, T), local_map_TE = rows(scratch.local_map_TE, T);
  gather_tokens(group, plan, xn_NC, tokens_TC);
  gather_tokens(group, plan, map_NE, map_TE);
  gather_tokens(group, plan, probs_NE, probs_TE);
  int64_t R = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E_loc; ++e) {
      const uint8_t routed = map_TE.data<uint8_t>()[t * E + first + e];
      local_map_TE.data<uint8_t>()[t * E_loc + e] = routed;
      R += routed != 0;
    }
  s.expert_rows = R;
  const TensorView sources_R = rows(s.expert_sources_R, R), counts_E = rows(s.tokens_per_expert_E, E_loc);
  ctx.kernels.moe_permute(tokens_TC, local_map_TE, TensorView(), rows(s.expert_rows_RC, R), TensorView(), sources_R,
                          counts_E);
  const TensorView probs_R = rows(s.expert_probs_R, R);
  for (int64_t e = 0, j = 0; e < E_loc; ++e)
    for (int64_t end = j + counts_E.data<int64_t>()[e]; j < end; ++j)
      store_f64(probs_R, j, load_f64(probs_TE, sources_R.data<int64_t>()[j] * E + first + e));
}

void MoeBlock::sum_to_tokens(const LayerContext& ctx, MoeSaved& s, MoeScratch& scratch, TensorView down_RC,
                             TensorView y_NC) const {
  const int64_t N = y_NC.size(0), T = s.gather_plan.total;
  const TensorView outputs_TC = rows(scratch.gathered_TC, T), sums_NC = rows(scratch.token_sums_NC, N);
  ctx.kernels.moe_unpermute(down_RC, rows(s.expert_sources_R, s.expert_rows), outputs_TC, Accumulate::overwrite);
  sum_tokens_to_owners(token_group(ctx), s.gather_plan, outputs_TC, sums_NC);
  // Without SP the expert-TP ranks gathered the same tokens: their FFN shards' partial sums are summed here.
  if (config_.parallel.etp > 1 && !config_.parallel.etp_gathers())
    ctx.parallel.group(dist::GroupKind::etp).all_reduce(sums_NC, dist::ReduceOp::sum);
  add_rows(sums_NC, y_NC);
}

void MoeBlock::sum_gathered_grads(const LayerContext& ctx, MoeSaved& s, MoeScratch& scratch, TensorView dx_RC,
                                  TensorView dprobs_R, TensorView dxn_NC) const {
  dist::ProcessGroup& group = token_group(ctx);
  const int64_t N = dxn_NC.size(0), T = s.gather_plan.total, R = s.expert_rows;
  const int64_t E = config_.router.num_experts, E_loc = E / config_.parallel.ep, first = first_local_expert(ctx);
  const TensorView sources_R = rows(s.expert_sources_R, R), grads_TC = rows(scratch.gathered_TC, T);
  ctx.kernels.moe_unpermute(dx_RC, sources_R, grads_TC, Accumulate::overwrite);
  sum_tokens_to_owners(group, s.gather_plan, grads_TC, dxn_NC);
  const TensorView dprobs_TE = rows(scratch.gathered_probs_TE, T);
  fill_zero(dprobs_TE);
  const int64_t* counts = s.tokens_per_expert_E.data<int64_t>();
  for (int64_t e = 0, j = 0; e < E_loc; ++e)
    for (int64_t end = j + counts[e]; j < end; ++j)
      store_f64(dprobs_TE, sources_R.data<int64_t>()[j] * E + first + e, load_f64(dprobs_R, j));
  sum_tokens_to_owners(group, s.gather_plan, dprobs_TE, rows(scratch.dprobs_NE, N));
}

template <class Visit>
void MoeBlock::for_each_saved(MoeSaved& s, int64_t N, DType dtype, Visit&& f) const {
  const DType stat = stat_dtype_for(dtype);
  const int64_t C = config_.hidden, E = config_.router.num_experts, J = max_routed_rows(N), R = max_expert_rows(N);
  const int64_t F = config_.expert_ffn, S = config_.shared_ffn;
  const bool moves_rows = config_.parallel.moves_rows();
  f(s.xn_NC, Shape{N, C}, dtype);
  f(s.rstd_N, Shape{N}, stat);
  for (Tensor* t : {&s.logits_NE, &s.probs_NE}) f(*t, Shape{N, E}, stat);
  f(s.routing_map_NE, Shape{N, E}, DType::u8);
  if (!config_.capacity.dropless()) {
    f(s.kept_probs_NE, Shape{N, E}, stat);
    f(s.kept_map_NE, Shape{N, E}, DType::u8);
  }
  f(s.router.scores_TE, Shape{N, E}, DType::f64);
  f(s.sorted_J, Shape{J}, DType::i64);
  f(s.tokens_per_expert_E, Shape{E}, DType::i64);
  f(s.probs_J, Shape{J}, stat);
  f(s.permuted_JC, Shape{J, C}, dtype);
  if (moves_rows) {
    f(s.expert_rows_RC, Shape{R, C}, dtype);
    f(s.expert_probs_R, Shape{R}, stat);
  }
  if (config_.parallel.gathers_tokens()) f(s.expert_sources_R, Shape{R}, DType::i64);
  for (Tensor* t : {&s.gate_RF, &s.up_RF, &s.act_RF}) f(*t, Shape{R, F}, dtype);
  if (S == 0) return;
  if (config_.parallel.sequence_parallel) f(s.shared_xn_NC, Shape{N, C}, dtype);
  for (Tensor* t : {&s.shared_gate_NS, &s.shared_up_NS, &s.shared_act_NS}) f(*t, Shape{N, S}, dtype);
  f(s.shared_out_NC, Shape{N, C}, dtype);
  f(s.shared_scale_N, Shape{N}, stat);
}

void MoeBlock::reserve(MoeSaved& s, int64_t N, DType dtype, TensorAccount a) const {
  for_each_saved(s, N, dtype, [&a](Tensor& t, const Shape& shape, DType type) { t = Tensor(shape, type, a); });
}

int64_t MoeBlock::saved_bytes(int64_t N, DType dtype) const {
  MoeSaved unallocated;
  int64_t bytes = 0;
  for_each_saved(unallocated, N, dtype, [&bytes](Tensor&, const Shape& shape, DType type) {
    bytes += int64_t(tensor_allocation_bytes(shape, type));
  });
  return bytes;
}

void MoeBlock::reserve(MoeScratch& s, int64_t N, DType dtype, TensorAccount a) const {
  const DType stat = stat_dtype_for(dtype);
  const int64_t C = config_.hidden, E = config_.router.num_experts, J = max_routed_rows(N), R = max_expert_rows(N);
  const int64_t F = config_.expert_ffn, S = config_.shared_ffn;
  const MoeParallel& p = config_.parallel;
  for (Tensor* t : {&s.expert_dy_RC, &s.dexpert_rows_RC}) *t = Tensor({R, C}, dtype, a);
  for (Tensor* t : {&s.scaled_act_RF, &s.dscaled_RF, &s.dact_RF, &s.dgate_RF, &s.dup_RF}) *t = Tensor({R, F}, dtype, a);
  s.dprobs_J = Tensor({J}, stat, a);
  if (p.moves_rows()) s.dprobs_R = Tensor({R}, stat, a);
  if (p.gathers_tokens()) {
    const int64_t T = N * p.ep * (p.etp_gathers() ? p.etp : 1);  // every rank's tokens
    s.gathered_TC = Tensor({T, C}, dtype, a);
    s.gathered_map_TE = Tensor({T, E}, DType::u8, a);
    s.gathered_probs_TE = Tensor({T, E}, stat, a);
    s.local_map_TE = Tensor({T, E / p.ep}, DType::u8, a);
    s.token_sums_NC = Tensor({N, C}, dtype, a);
  } else if (p.moves_rows()) {
    s.local_JC = Tensor({J, C}, dtype, a);
    s.staging_RC = Tensor({R, C}, dtype, a);
    s.staging_R1 = Tensor({R, 1}, stat, a);
  }
  if (p.ep > 1 && p.etp_gathers() && !p.gathers_tokens()) {
    const int64_t exchanged = max_routed_rows(N) * p.ep;
    s.middle_RC = Tensor({exchanged, C}, dtype, a);
    s.middle_R1 = Tensor({exchanged, 1}, stat, a);
  }
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
  if (p.sequence_parallel) s.dshared_xn_NC = Tensor({N, C}, dtype, a);
}

void MoeBlock::forward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, TensorView h_NC,
                       TensorView y_NC, MoeSaved& s, MoeScratch& scratch, TensorView replay_experts_Nk) const {
  const int64_t N = shape.local_tokens;
  const TensorView xn_NC = rows(s.xn_NC, N);
  kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  ctx.kernels.rmsnorm_forward({config_.rms_norm_eps}, h_NC, w.norm_w_C, xn_NC, norm_saved);
  copy_convert(h_NC, y_NC);
  forward_experts(ctx, w, xn_NC, y_NC, s, scratch, replay_experts_Nk);
}

void MoeBlock::backward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, const MoeParams& g,
                        TensorView h_NC, MoeSaved& s, MoeScratch& scratch, TensorView dresid_NC,
                        TensorView dlogits_extra_NE) const {
  const int64_t N = shape.local_tokens;
  const TensorView dxn_NC = rows(scratch.dxn_NC, N);
  backward_experts(ctx, w, g, rows(s.xn_NC, N), s, scratch, dresid_NC, dxn_NC, dlogits_extra_NE);
  const kernels::RmsNormSaved norm_saved{rows(s.rstd_N, N)};
  ctx.kernels.rmsnorm_backward({config_.rms_norm_eps}, dxn_NC, h_NC, w.norm_w_C, norm_saved, dresid_NC, g.norm_w_C,
                               Accumulate::add);
}

void MoeBlock::forward_experts(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, TensorView y_NC,
                               MoeSaved& s, MoeScratch& scratch, TensorView replay_experts_Nk) const {
  const auto& k = ctx.kernels;
  const int64_t N = xn_NC.size(0), E = config_.router.num_experts;
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
  // With a capacity the rows follow the kept map; the router's own map stays for its backward (moe_capacity.h).
  const TensorView routed_probs_NE = routed_probs(s, N), routed_map_NE = routed_map(s, N);
  s.dropped = config_.capacity.dropless() ? 0
                                          : apply_capacity(config_.capacity, config_.router.top_k, probs_NE, map_NE,
                                                           routed_probs_NE, routed_map_NE);
  int64_t J = 0;
  for (int64_t i = 0; i < N * E; ++i) J += routed_map_NE.data<uint8_t>()[i] != 0;
  s.routed_rows = J;

  const TensorView sorted_J = rows(s.sorted_J, J), permuted_JC = rows(s.permuted_JC, J);
  ExpertExchange rows_way = exchange(ctx, s);
  // moe_shared_expert_overlap: the shared expert's halves run while the rows travel (the same arithmetic).
  const bool overlap = config_.shared_expert_overlap && rows_way.moves_rows();
  int64_t shared_rows = 0;
  if (config_.parallel.gathers_tokens()) {
    gather_to_experts(ctx, s, scratch, xn_NC, routed_probs_NE, routed_map_NE);
  } else {
    k.moe_permute(xn_NC, routed_map_NE, TensorView(), permuted_JC, TensorView(), sorted_J, s.tokens_per_expert_E);
    gather_row_probs(s, routed_probs_NE, E, J);
    rows_way.plan(s.tokens_per_expert_E);
    s.expert_rows = rows_way.expert_rows();
    if (rows_way.moves_rows()) {  // the rows go to their experts' ranks, with their weights
      rows_way.to_experts(as_column(s.probs_J, J), scratch.middle_R1, scratch.staging_R1,
                          as_column(s.expert_probs_R, s.expert_rows));
      dist::CommHandle pending = rows_way.start_to_experts(permuted_JC, scratch.staging_RC);
      if (overlap) shared_rows = shared_fc1(ctx, w, xn_NC, s);  // while the rows travel
      rows_way.finish_to_experts(pending, permuted_JC, scratch.middle_RC, scratch.staging_RC, s.expert_rows_RC);
    }
  }
  const ExpertSide x = expert_side(ctx, s, w);
  const int64_t R = x.rows;
  const TensorView gate_RF = rows(s.gate_RF, R), up_RF = rows(s.up_RF, R), act_RF = rows(s.act_RF, R);
  const ExpertGemms gemms{k, config_.grouped_gemm, x.sizes};
  gemms.forward(x.x_RC, x.wg_EFC, gate_RF);
  gemms.forward(x.x_RC, x.wu_EFC, up_RF);
  k.swiglu_forward(gate_RF, up_RF, act_RF);
  const TensorView scaled_RF = rows(scratch.scaled_act_RF, R), down_RC = rows(scratch.expert_dy_RC, R);
  scale_rows(act_RF, x.probs_R, scaled_RF);
  gemms.forward(scaled_RF, x.wd_ECF, down_RC);
  if (config_.parallel.gathers_tokens()) {
    sum_to_tokens(ctx, s, scratch, down_RC, y_NC);
  } else {
    dist::CommHandle pending =
        rows_way.start_from_experts(down_RC, scratch.middle_RC, scratch.staging_RC, scratch.local_JC);
    if (overlap) shared_fc2(ctx, w, xn_NC, shared_rows, s, scratch);  // while the outputs travel back
    k.moe_unpermute(rows_way.finish_from_experts(pending), sorted_J, y_NC, Accumulate::add);
  }
  if (config_.shared_ffn == 0) return;
  if (!overlap) shared_fc2(ctx, w, xn_NC, shared_fc1(ctx, w, xn_NC, s), s, scratch);
  add_scaled_rows(rows(s.shared_out_NC, xn_NC.size(0)), rows(s.shared_scale_N, xn_NC.size(0)), y_NC);
}

int64_t MoeBlock::shared_fc1(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, MoeSaved& s) const {
  const auto& k = ctx.kernels;
  const int64_t N = xn_NC.size(0);
  // Split over TP as the dense MLP (tp_region.h): with SP its input is every rank's tokens, gathered.
  const TensorView xs_NC = enter_column_parallel(ctx, xn_NC, ctx.parallel.sequence_parallel()
                                                                 ? rows(s.shared_xn_NC, N * ctx.parallel.tp().size())
                                                                 : TensorView());
  const int64_t Ns = xs_NC.size(0);
  const TensorView sg_NS = rows(s.shared_gate_NS, Ns), su_NS = rows(s.shared_up_NS, Ns);
  k.linear_forward(xs_NC, w.shared_wg_SC, TensorView(), sg_NS);
  k.linear_forward(xs_NC, w.shared_wu_SC, TensorView(), su_NS);
  k.swiglu_forward(sg_NS, su_NS, rows(s.shared_act_NS, Ns));
  return Ns;
}

void MoeBlock::shared_fc2(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, int64_t Ns, MoeSaved& s,
                          MoeScratch& scratch) const {
  const int64_t N = xn_NC.size(0);
  const TensorView scale_N = rows(s.shared_scale_N, N);
  row_parallel_linear(ctx, rows(s.shared_act_NS, Ns), w.shared_wd_CS, rows(s.shared_out_NC, N), ctx.sp_full(Ns));
  if (config_.shared_gate) {
    const TensorView logit_N1 = rows(scratch.shared_logit_N1, N);
    ctx.kernels.linear_forward(xn_NC, w.shared_gate_1C, TensorView(), logit_N1);
    sigmoid_rows(logit_N1, scale_N);
  } else {
    for (int64_t n = 0; n < N; ++n) store_f64(scale_N, n, 1.0);
  }
}

void MoeBlock::backward_experts(const LayerContext& ctx, const MoeParams& w, const MoeParams& g, TensorView xn_NC,
                                MoeSaved& s, MoeScratch& scratch, TensorView dy_NC, TensorView dxn_NC,
                                TensorView dlogits_extra_NE) const {
  RF_CHECK(config_.parallel.tp == 1 || config_.parallel.sequence_parallel,
           "MoE backward at TP {} needs sequence parallel (as Megatron's)", config_.parallel.tp);
  const auto& k = ctx.kernels;
  const Accumulate wgrad_mode = ctx.linear_weight_grads;
  const int64_t N = xn_NC.size(0), E = config_.router.num_experts, J = s.routed_rows;
  const TensorView sorted_J = rows(s.sorted_J, J);
  ExpertExchange rows_way = exchange(ctx, s);
  const ExpertSide x = expert_side(ctx, s, w), gx = expert_side(ctx, s, g);
  const int64_t R = x.rows;
  const bool gathered = config_.parallel.gathers_tokens();

  // Each row's output gradient, moved to its expert's rank (and every ETP rank) as the rows were.
  const TensorView dy_RC = rows(scratch.expert_dy_RC, R);
  if (gathered) {
    const TensorView gathered_TC = rows(scratch.gathered_TC, s.gather_plan.total);
    gather_tokens(token_group(ctx), s.gather_plan, dy_NC, gathered_TC);
    k.moe_gather(gathered_TC, rows(s.expert_sources_R, R), dy_RC);
  } else if (rows_way.moves_rows()) {
    k.moe_gather(dy_NC, sorted_J, rows(scratch.local_JC, J));
    rows_way.to_experts(rows(scratch.local_JC, J), scratch.middle_RC, scratch.staging_RC, dy_RC);
  } else {
    k.moe_gather(dy_NC, sorted_J, dy_RC);
  }
  // Down projection: its input is each row's activation times its weight, recomputed from the kept activation.
  const TensorView act_RF = rows(s.act_RF, R), scaled_RF = rows(scratch.scaled_act_RF, R);
  const TensorView dscaled_RF = rows(scratch.dscaled_RF, R), dact_RF = rows(scratch.dact_RF, R);
  scale_rows(act_RF, x.probs_R, scaled_RF);
  const ExpertGemms gemms{k, config_.grouped_gemm, x.sizes};
  gemms.dgrad(dy_RC, x.wd_ECF, dscaled_RF, Accumulate::overwrite);
  gemms.wgrad(dy_RC, scaled_RF, gx.wd_ECF, wgrad_mode);
  // Each row's weight gradient (a partial sum over this rank's FFN shard with ETP).
  const TensorView dprobs_R = config_.parallel.moves_rows() ? rows(scratch.dprobs_R, R) : rows(scratch.dprobs_J, J);
  row_dots(dscaled_RF, act_RF, dprobs_R);
  scale_rows(dscaled_RF, x.probs_R, dact_RF);

  const TensorView dgate_RF = rows(scratch.dgate_RF, R), dup_RF = rows(scratch.dup_RF, R);
  k.swiglu_backward(rows(s.gate_RF, R), rows(s.up_RF, R), dact_RF, dgate_RF, dup_RF);
  const TensorView dx_RC = rows(scratch.dexpert_rows_RC, R);
  gemms.dgrad(dgate_RF, x.wg_EFC, dx_RC, Accumulate::overwrite);
  gemms.dgrad(dup_RF, x.wu_EFC, dx_RC, Accumulate::add);
  gemms.wgrad(dgate_RF, x.x_RC, gx.wg_EFC, wgrad_mode);
  gemms.wgrad(dup_RF, x.x_RC, gx.wu_EFC, wgrad_mode);
  // The rows' gradients and their weights' back to the tokens' rank, summed over the FFN shards.
  if (gathered) {
    sum_gathered_grads(ctx, s, scratch, dx_RC, dprobs_R, dxn_NC);
  } else {
    const TensorView dpermuted_JC =
        rows_way.from_experts(dx_RC, scratch.middle_RC, scratch.staging_RC, scratch.local_JC);
    const TensorView dprobs_J = rows_way.from_experts(dprobs_R.reshape({R, 1}), scratch.middle_R1,
                                                      scratch.staging_R1, as_column(scratch.dprobs_J, J));
    RF_CHECK(dprobs_J.raw() == rows(scratch.dprobs_J, J).raw(),
             "moe backward: the weights' gradients are not in dprobs_J");
    k.moe_unpermute(dpermuted_JC, sorted_J, dxn_NC, Accumulate::overwrite);
    scatter_row_grads(s, scratch, N, E, J);
  }

  // The router: the weights' gradients back to the logits (the choice has none), plus the balancing losses'.
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
  if (config_.shared_ffn > 0) shared_backward(ctx, w, g, xn_NC, s, scratch, dy_NC, dxn_NC);
}

void MoeBlock::shared_backward(const LayerContext& ctx, const MoeParams& w, const MoeParams& g, TensorView xn_NC,
                               MoeSaved& s, MoeScratch& scratch, TensorView dy_NC, TensorView dxn_NC) const {
  const auto& k = ctx.kernels;
  const Accumulate wgrad_mode = ctx.linear_weight_grads;
  const int64_t N = xn_NC.size(0);
  const bool sp = ctx.parallel.sequence_parallel();
  const int64_t Ns = sp ? N * ctx.parallel.tp().size() : N;
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
  // The TP regions' backward (tp_region.h): the output gradient of all N tokens, the input's summed over TP.
  const TensorView dsout_full = row_parallel_output_grad(ctx, dsout_NC, ctx.sp_full(Ns));
  const TensorView dsact_NS = rows(scratch.dshared_act_NS, Ns), sact_NS = rows(s.shared_act_NS, Ns);
  k.linear_dgrad(dsout_full, w.shared_wd_CS, dsact_NS, Accumulate::overwrite);
  k.linear_wgrad(dsout_full, sact_NS, g.shared_wd_CS, TensorView(), wgrad_mode);
  const TensorView dsg_NS = rows(scratch.dshared_gate_NS, Ns), dsu_NS = rows(scratch.dshared_up_NS, Ns);
  k.swiglu_backward(rows(s.shared_gate_NS, Ns), rows(s.shared_up_NS, Ns), dsact_NS, dsg_NS, dsu_NS);
  // Without SP the input gradient joins dxn_NC directly (TP 1: the backward refuses TP > 1 without SP).
  const TensorView xs_NC = sp ? rows(s.shared_xn_NC, Ns) : xn_NC;
  const TensorView dxs_NC = sp ? rows(scratch.dshared_xn_NC, Ns) : dxn_NC;
  k.linear_dgrad(dsg_NS, w.shared_wg_SC, dxs_NC, sp ? Accumulate::overwrite : Accumulate::add);
  k.linear_dgrad(dsu_NS, w.shared_wu_SC, dxs_NC, Accumulate::add);
  k.linear_wgrad(dsg_NS, xs_NC, g.shared_wg_SC, TensorView(), wgrad_mode);
  k.linear_wgrad(dsu_NS, xs_NC, g.shared_wu_SC, TensorView(), wgrad_mode);
  if (sp) add_rows(leave_column_parallel_backward(ctx, dxs_NC, ctx.sp_local(N)), dxn_NC);
}

}  // namespace rf::model
