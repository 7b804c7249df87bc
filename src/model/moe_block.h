// The MoE half of a decoder layer (megatron.md §6), with its pre-norm and residual:
//   xn = rmsnorm(h);  probs, map = router(xn Wr^T);  y = h + sum over the chosen experts e of the token's weight
//   times expert_e(xn) + [sigmoid(xn wsg^T)] shared(xn)
// every expert and the shared expert a SwiGLU MLP (down(silu(gate x) * up x)). The experts run dropless on the
// rows the router chose, grouped by expert (moe_permute: expert-major, tokens ascending) through one grouped GEMM
// per projection over all experts; each row's activation is scaled by its routing weight before the down
// projection, as Megatron's experts do (§6.7), so the combine (moe_unpermute) is a plain sum, in increasing row order.
// forward_experts / backward_experts are the layer without its norm and residual (DeepSeek-V3's DeepseekV3MoE).
// Parallel (MoeParallel; moe_dispatch.h moves the rows):
//   EP   this rank runs experts [q E/EP, (q+1) E/EP) of its EP group on the rows every EP rank routes to them; every
//        rank keeps all experts' weights (the layout is the whole model's: each expert's gradient comes from its own
//        rank, zeros elsewhere, and the data-parallel sum completes it).
//        The allgather dispatcher gathers every token of the group instead and sums the outputs back to their ranks.
//   TP   the router and norm are replicated: with sequence parallel each TP rank routes its own n = N / TP tokens
//        (their gradients summed over TP by CausalLm::finish_grads, as the norms'); the shared expert is split over
//        TP as the dense MLP (its input all-gathered, its output reduce-scattered); each expert's FFN is split over
//        TP when etp = TP (its rows gathered over the ETP ranks, its partial outputs summed), or whole with etp = 1
//        (its gradients summed over TP). Training at TP > 1 needs sequence parallel (as Megatron); forward-only
//        passes without it run every TP rank on all N tokens.
// The router runs in the statistics dtype (f32 for f32 and bf16 weights, f64 for f64) on logits computed in the
// weights' dtype (HF's Qwen-MoE gate is a Linear in the model's dtype, its softmax in f32).
// Legend: N tokens (n this rank's with SP), C hidden, E experts, k = top_k, J = n k routed rows, F an expert's FFN
// width on this rank, S the shared expert's.
#pragma once

#include "core/tensor.h"
#include "model/layer_context.h"
#include "model/model_config.h"
#include "model/moe_capacity.h"
#include "model/moe_dispatch.h"
#include "model/moe_router.h"

namespace rf::model {

// The groups an MoE layer's experts are split over.
struct MoeParallel {
  int64_t ep = 1;   // expert_model_parallel_size (with TP-extend-EP, times the TP size)
  int64_t tp = 1;   // the dense TP size: the shared expert's split
  int64_t etp = 1;  // each expert's FFN split: 1 or tp
  bool sequence_parallel = false;
  MoeDispatcher dispatcher = MoeDispatcher::alltoall;  // moe_token_dispatcher_type
  // The expert-TP ranks route different tokens: their rows are gathered for the experts.
  bool etp_gathers() const { return etp > 1 && sequence_parallel; }
  // Rows move to other ranks' experts; with the allgather dispatcher, by gathering every token.
  bool moves_rows() const { return ep > 1 || etp_gathers(); }
  bool gathers_tokens() const { return dispatcher == MoeDispatcher::allgather && moves_rows(); }
};

struct MoeBlockConfig {
  RouterConfig router;
  int64_t hidden = 0;      // C
  int64_t expert_ffn = 0;  // F: moe_intermediate_size / etp
  int64_t shared_ffn = 0;  // S: shared_expert_intermediate_size / tp; 0: no shared expert
  bool shared_gate = false;
  double rms_norm_eps = 1e-6;
  MoeParallel parallel;
  // Dropless, or each expert's tokens capped at capacity before the dispatch (moe_capacity.h): a dropped (token,
  // expert) pair routes no row; with pad_to_capacity every expert gets exactly its capacity (zero-weight rows).
  CapacityConfig capacity;
  bool grouped_gemm = true;  // moe_grouped_gemm; false: a linear call per expert (Megatron's SequentialMLP)
  // moe_shared_expert_overlap: the shared expert's first half runs while the rows travel to their experts, its second
  // while their outputs travel back (forward; the alltoall dispatcher; the same bits as without).
  bool shared_expert_overlap = false;
  static MoeBlockConfig from_model(const ModelConfig& config, const MoeParallel& parallel = {});
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
  // What this rank's experts compute on (R rows: J when no rows move, where the two are one): with EP or ETP the
  // rows and weights moved to them, the plans of that exchange, then the experts' activations.
  Tensor expert_rows_RC, expert_probs_R;
  ExpertRowPlan plan;
  ExpertTpPlan etp_plan;
  TokenGatherPlan gather_plan;  // allgather: every rank's tokens
  Tensor expert_sources_R;      // allgather: each expert row's token, in the gathered order (i64)
  Tensor shared_xn_NC;  // sequence parallel: the normed input of all N tokens, the shared expert's
  Tensor gate_RF, up_RF, act_RF;
  Tensor shared_gate_NS, shared_up_NS, shared_act_NS, shared_out_NC, shared_scale_N;
  int64_t routed_rows = 0;  // J of the last forward
  int64_t expert_rows = 0;  // R of the last forward
  int64_t dropped = 0;      // (token, expert) pairs the capacity dropped in the last forward

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&xn_NC, &rstd_N, &logits_NE, &probs_NE, &routing_map_NE, &kept_probs_NE, &kept_map_NE,
                      &router.scores_TE, &sorted_J, &tokens_per_expert_E, &probs_J, &permuted_JC, &expert_rows_RC,
                      &expert_probs_R, &expert_sources_R, &gate_RF, &up_RF, &act_RF, &shared_xn_NC, &shared_gate_NS,
                      &shared_up_NS, &shared_act_NS, &shared_out_NC, &shared_scale_N})
      f(*t);
  }
};

// Expert side (R rows) and, when rows move, the local side (J rows), the exchange's staging and its EP-exchanged
// rows on their way to the ETP gather (middle).
struct MoeScratch {
  Tensor expert_dy_RC, scaled_act_RF, dscaled_RF, dact_RF, dgate_RF, dup_RF, dexpert_rows_RC, dprobs_R;
  Tensor local_JC, staging_RC, staging_R1, middle_RC, middle_R1, dprobs_J, dprobs_NE;
  Tensor dlogits_NE, dlogits_cast_NE, logits_cast_NE, dxn_NC;
  Tensor dshared_out_NC, dshared_act_NS, dshared_gate_NS, dshared_up_NS, dshared_scale_N, shared_logit_N1;
  Tensor dshared_xn_NC;  // sequence parallel: the shared expert's input gradient for all N tokens
  // allgather: the group's T tokens (their rows, map, weights), the map's local columns, this rank's summed rows.
  Tensor gathered_TC, gathered_map_TE, gathered_probs_TE, local_map_TE, token_sums_NC;

  template <class F>
  void for_each_tensor(F&& f) {
    for (Tensor* t : {&expert_dy_RC, &scaled_act_RF, &dscaled_RF, &dact_RF, &dgate_RF, &dup_RF, &dexpert_rows_RC,
                      &dprobs_R, &local_JC, &staging_RC, &staging_R1, &middle_RC, &middle_R1, &dprobs_J, &dprobs_NE,
                      &dlogits_NE, &dlogits_cast_NE, &logits_cast_NE, &dxn_NC, &dshared_out_NC, &dshared_act_NS,
                      &dshared_gate_NS, &dshared_up_NS, &dshared_scale_N, &shared_logit_N1, &dshared_xn_NC,
                      &gathered_TC, &gathered_map_TE, &gathered_probs_TE, &local_map_TE, &token_sums_NC})
      f(*t);
  }
};

// What the engine's moe_* keys set on every MoE layer (CausalLm::set_moe_experts).
struct MoeExpertOptions {
  CapacityConfig capacity;  // default dropless
  bool grouped_gemm = true;
  MoeDispatcher dispatcher = MoeDispatcher::alltoall;
  bool shared_expert_overlap = false;
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
  // The most rows this rank's experts run on: every EP (and gathering ETP) rank's rows could choose them.
  int64_t max_expert_rows(int64_t max_tokens) const;
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
  ExpertSide expert_side(const LayerContext& ctx, const MoeSaved& saved, const MoeParams& w) const;
  // The way of the rows to this rank's experts and back, over the groups the config splits them over.
  ExpertExchange exchange(const LayerContext& ctx, MoeSaved& saved) const;
  // allgather: the group the tokens are gathered over, and the first of this rank's local experts.
  dist::ProcessGroup& token_group(const LayerContext& ctx) const;
  int64_t first_local_expert(const LayerContext& ctx) const;
  // allgather forward: the group's tokens gathered and permuted by this rank's experts into saved.expert_rows_RC
  // (their weights, sources and counts); the experts' outputs summed back into y_NC.
  void gather_to_experts(const LayerContext& ctx, MoeSaved& saved, MoeScratch& scratch, TensorView xn_NC,
                         TensorView probs_NE, TensorView map_NE) const;
  void sum_to_tokens(const LayerContext& ctx, MoeSaved& saved, MoeScratch& scratch, TensorView down_RC,
                     TensorView y_NC) const;
  // allgather backward: the rows' input and weight gradients summed back to the tokens' ranks, into dxn_NC
  // (overwritten) and scratch.dprobs_NE.
  void sum_gathered_grads(const LayerContext& ctx, MoeSaved& saved, MoeScratch& scratch, TensorView dx_RC,
                          TensorView dprobs_R, TensorView dxn_NC) const;
  // The shared expert's forward in two halves (moe_shared_expert_overlap runs each while rows travel): the column-
  // parallel gate/up and their product (returns its rows: all N tokens with SP), then the row-parallel down
  // projection and the gate, into saved.shared_out_NC and shared_scale_N. Backward adds its input gradient to dxn_NC.
  int64_t shared_fc1(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, MoeSaved& saved) const;
  void shared_fc2(const LayerContext& ctx, const MoeParams& w, TensorView xn_NC, int64_t shared_rows,
                  MoeSaved& saved, MoeScratch& scratch) const;
  void shared_backward(const LayerContext& ctx, const MoeParams& w, const MoeParams& g, TensorView xn_NC,
                       MoeSaved& saved, MoeScratch& scratch, TensorView dy_NC, TensorView dxn_NC) const;

  MoeBlockConfig config_;
};

}  // namespace rf::model
