// The MoE half of a decoder layer (megatron.md §6), with its pre-norm and residual:
//   xn = rmsnorm(h);  probs, map = router(xn Wr^T);  y = h + sum over the chosen experts e of the token's weight
//   times expert_e(xn) + [sigmoid(xn wsg^T)] shared(xn)
// every expert and the shared expert a SwiGLU MLP (down(silu(gate x) * up x)). The experts run dropless on the
// rows the router chose, grouped by expert (moe_permute: expert-major, tokens ascending) through one grouped GEMM
// per projection over all experts; each row's activation is scaled by its routing weight before the down
// projection, as Megatron's experts do (§6.7), so the combine (moe_unpermute) is a plain sum, in increasing row order.
// forward_experts / backward_experts are the layer without its norm and residual (DeepSeek-V3's DeepseekV3MoE).
// Expert parallel (ep_size > 1, the LayerContext's EP group): this rank runs experts [q E/EP, (q+1) E/EP) on the rows
// every EP rank routes to them (moe_dispatch.h); every rank keeps all experts' weights (the layout is the whole
// model's: each expert's gradient comes from its own rank, zeros elsewhere, and the data-parallel sum completes it).
// No tensor or sequence parallelism yet (ParamLayout refuses MoE at TP > 1 by name).
// The router runs in the statistics dtype (f32 for f32 and bf16 weights, f64 for f64) on logits computed in the
// weights' dtype (HF's Qwen-MoE gate is a Linear in the model's dtype, its softmax in f32).
// Legend: N tokens, C hidden, E experts, k = top_k, J = N k routed rows, F an expert's FFN width, S the shared
// expert's.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/moe_capacity.h"
#include "model/moe_dispatch.h"
#include "model/moe_router.h"

namespace rf::model {

struct MoeBlockConfig {
  RouterConfig router;
  int64_t hidden = 0;      // C
  int64_t expert_ffn = 0;  // F
  int64_t shared_ffn = 0;  // S; 0: no shared expert
  bool shared_gate = false;
  double rms_norm_eps = 1e-6;
  int64_t ep_size = 1;  // expert_model_parallel_size
  // Dropless, or each expert's tokens capped at capacity before the dispatch (moe_capacity.h): a dropped (token,
  // expert) pair routes no row; with pad_to_capacity every expert gets exactly its capacity (zero-weight rows).
  CapacityConfig capacity;
  bool grouped_gemm = true;  // moe_grouped_gemm; false: a linear call per expert (Megatron's SequentialMLP)
  static MoeBlockConfig from_model(const ModelConfig& config, int64_t ep_size = 1);
};

struct MoeParams {
  TensorView norm_w_C, router_EC;
  TensorView expert_bias_E;  // sigmoid routers' choice bias (DeepSeek-V3); empty otherwise. Never has a gradient.
  TensorView wg_EFC, wu_EFC, wd_ECF;  // every expert's gate, up and down weights, one tensor each (param_layout.h)
  TensorView shared_wg_SC, shared_wu_SC, shared_wd_CS;  // empty without a shared expert
  TensorView shared_gate_1C;                            // empty without its gate

  // Qwen2-MoE / Qwen3-MoE names of MoE layer `layer`.
  template <class Store>
  static MoeParams bind(const Store& store, int64_t layer, const ModelConfig& config);
};

struct MoeSaved {
  Tensor xn_NC, rstd_N;
  Tensor logits_NE;  // the router's, in the statistics dtype
  Tensor probs_NE, routing_map_NE;
  Tensor kept_probs_NE, kept_map_NE;  // with a capacity: what the dispatch routes (the router's, less the dropped)
  RouterSaved router;
  Tensor sorted_J, tokens_per_expert_E;  // i64: the rows' source tokens; rows per expert
  Tensor probs_J;                        // each row's routing weight
  Tensor permuted_JC;
  // What this rank's experts compute on (R rows: J without expert parallelism, where the two are one): with EP the
  // rows and weights dispatched to them, the plan of that exchange, then the experts' activations.
  Tensor expert_rows_RC, expert_probs_R;
  ExpertRowPlan plan;
  Tensor gate_RF, up_RF, act_RF;
  Tensor shared_gate_NS, shared_up_NS, shared_act_NS, shared_out_NC, shared_scale_N;
  int64_t routed_rows = 0;  // J of the last forward
  int64_t expert_rows = 0;  // R of the last forward
  int64_t dropped = 0;      // (token, expert) pairs the capacity dropped in the last forward

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xn_NC, &rstd_N, &logits_NE, &probs_NE, &routing_map_NE, &kept_probs_NE, &kept_map_NE,
                      &router.scores_TE, &sorted_J, &tokens_per_expert_E, &probs_J, &permuted_JC, &expert_rows_RC,
                      &expert_probs_R, &gate_RF, &up_RF, &act_RF, &shared_gate_NS, &shared_up_NS, &shared_act_NS,
                      &shared_out_NC, &shared_scale_N})
      f(*t);
  }
};

// Expert side (R rows) and, with expert parallelism, the local side (J rows) and the exchange's staging.
struct MoeScratch {
  Tensor expert_dy_RC, scaled_act_RF, dscaled_RF, dact_RF, dgate_RF, dup_RF, dexpert_rows_RC, dprobs_R;
  Tensor local_JC, staging_RC, staging_R1, dprobs_J, dprobs_NE;
  Tensor dlogits_NE, dlogits_cast_NE, logits_cast_NE, dxn_NC;
  Tensor dshared_out_NC, dshared_act_NS, dshared_gate_NS, dshared_up_NS, dshared_scale_N, shared_logit_N1;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&expert_dy_RC, &scaled_act_RF, &dscaled_RF, &dact_RF, &dgate_RF, &dup_RF, &dexpert_rows_RC,
                      &dprobs_R, &local_JC, &staging_RC, &staging_R1, &dprobs_J, &dprobs_NE, &dlogits_NE,
                      &dlogits_cast_NE, &logits_cast_NE, &dxn_NC, &dshared_out_NC, &dshared_act_NS, &dshared_gate_NS,
                      &dshared_up_NS, &dshared_scale_N, &shared_logit_N1})
      f(*t);
  }
};

class MoeBlock {
 public:
  explicit MoeBlock(const MoeBlockConfig& config);

  const MoeBlockConfig& config() const { return config_; }
  // What forward keeps for backward of up to max_tokens tokens (every tensor: no selective recompute inside).
  void reserve(MoeSaved& saved, int64_t max_tokens, DType dtype, TensorAccount account) const;
  // What that reserve allocates, in the tracker's units, without allocating it (activation_plan.h).
  int64_t saved_bytes(int64_t max_tokens, DType dtype) const;
  // The backward's workspace (and forward's cast of the router logits).
  void reserve(MoeScratch& scratch, int64_t max_tokens, DType dtype, TensorAccount account) const;

  // y_NC = h_NC + moe(rmsnorm(h_NC)). replay_experts_Nk (i32 [N, k]), when given, are the experts each token
  // goes to (route_forward_replayed: router replay); empty, the router chooses.
  void forward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, TensorView h_NC,
               TensorView y_NC, MoeSaved& saved, MoeScratch& scratch,
               TensorView replay_experts_Nk = TensorView()) const;
  // dresid_NC: dL/dy on entry, dL/dh on return; parameter gradients += into g (linear weights by
  // ctx.linear_weight_grads).
  // dlogits_extra_NE as in backward_experts.
  void backward(const LayerContext& ctx, const BatchShape& shape, const MoeParams& w, const MoeParams& g,
                TensorView h_NC, MoeSaved& saved, MoeScratch& scratch, TensorView dresid_NC,
                TensorView dlogits_extra_NE = TensorView()) const;

  // The layer without norm and residual: y_NC += moe(xn_NC) (saved.xn_NC is not written).
  void forward_experts(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, TensorView y_NC,
                       MoeSaved& saved, MoeScratch& scratch, TensorView replay_experts_Nk = TensorView()) const;
  // dxn_NC (overwritten) from dy_NC; its gradients += into g. dlogits_extra_NE, when given, is added to the
  // router logits' gradient (the load-balancing losses', in the statistics dtype).
  void backward_experts(const LayerContext& ctx, const MoeParams& w, const MoeParams& g, TensorView xn_NC,
                        MoeSaved& saved, MoeScratch& scratch, TensorView dy_NC, TensorView dxn_NC,
                        TensorView dlogits_extra_NE = TensorView()) const;

 private:
  // The most rows a forward of max_tokens tokens routes: N k, or with pad_to_capacity E C when more.
  int64_t max_routed_rows(int64_t max_tokens) const;
  // Calls f(tensor, shape, dtype) for each tensor of `saved` that reserve allocates for max_tokens tokens.
  template <class Visit>
  void for_each_saved(MoeSaved& saved, int64_t max_tokens, DType dtype, Visit&& f) const;
  // The rows this rank's experts run on, their weights and group sizes (moe_dispatch.h's expert side), after
  // forward_experts' dispatch; and those experts' weights, or gradients, of `w`.
  struct ExpertSide {
    TensorView x_RC, probs_R;
    std::span<const int64_t> sizes;
    int64_t rows = 0;
    TensorView wg_EFC, wu_EFC, wd_ECF;
  };
  ExpertSide expert_side(const MoeSaved& saved, const MoeParams& w) const;
  // The EP group when expert parallel, else null.
  dist::ProcessGroup* expert_group(const LayerContext& ctx) const;

  MoeBlockConfig config_;
};

}  // namespace rf::model
