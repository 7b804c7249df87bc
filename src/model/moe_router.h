// The MoE router's choice of experts (megatron.md §6.2, Megatron's TopKRouter after the gate's GEMM), forward and
// backward, from each token's E gate logits to its top-k experts and their weights:
//   softmax, pre_softmax = false (Mixtral; Qwen3-MoE with norm_topk_prob): top-k of the logits, softmax over those k;
//   softmax, pre_softmax = true (Qwen2-MoE, DeepSeek-V2): softmax over all E, top-k of the probabilities, which are
//     renormalised to sum 1 with normalize_topk;
//   sigmoid (DeepSeek-V3): s = sigmoid(logit); the choice is on s + expert_bias (the aux-loss-free bias steers the
//     choice only), the weights are s at the chosen experts, renormalised (p / (sum p + 1e-20)) with normalize_topk.
// Group-limited routing (num_groups > 0, DeepSeek's n_group / topk_group): the experts are num_groups equal groups;
// a group's score is the sum of its top (top_k / group_topk) choice scores (DeepSeek-V3 and Megatron: its top 2 when
// top_k / group_topk is 2); only the best group_topk groups' experts can be chosen. Then every weight is multiplied
// by scaling_factor (routed_scaling_factor). Ties go to the lower expert index, as torch.topk's do on the CPU.
// Outputs are dense, as Megatron's: probs_TE (0 at the experts not chosen) and routing_map_TE (1 at the chosen),
// what the dispatcher permutes by. Backward takes dL/dprobs_TE and gives dL/dlogits_TE (the choice itself has no
// gradient; the expert bias none).
// All arithmetic in f64 on f32 or f64 tensors (E is small: this is not a hot loop next to the experts' GEMMs).
// Legend: T tokens, E experts, k = top_k.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace rf::model {

enum class RouterScore : uint8_t { softmax, sigmoid };

struct RouterConfig {
  int64_t num_experts = 0;  // E
  int64_t top_k = 0;
  RouterScore score = RouterScore::softmax;
  bool pre_softmax = false;     // softmax only
  bool normalize_topk = false;  // pre-softmax softmax and sigmoid: the chosen weights renormalised to sum 1
  double scaling_factor = 1.0;
  int64_t num_groups = 0;  // 0: no group-limited routing
  int64_t group_topk = 0;
  // Throws rf::ConfigError naming `key_prefix` + the key (num_experts_per_tok, n_group, topk_group, ...).
  void validate(std::string_view key_prefix) const;
};

// What backward reads: the scores the weights were taken from (softmax or sigmoid of the logits), per token.
struct RouterSaved {
  Tensor scores_TE;  // f64
};

// logits_TE f32 or f64; expert_bias_E empty or [E] (sigmoid only); probs_TE f32/f64 and routing_map_TE u8, written.
void route_forward(const RouterConfig& config, TensorView logits_TE, TensorView expert_bias_E, TensorView probs_TE,
                   TensorView routing_map_TE, RouterSaved& saved);
// Router replay (verl's / ROLL's router_replay R2 and R3): the experts are given, experts_Tk (i32 or i64 [T, k],
// distinct per token, any order; a row of -1: no record, the router chooses), and the weights computed from these
// logits for THOSE experts with the same score function, normalisation and scaling as route_forward (the group
// limit and the expert bias, which only steer the choice, play no part). Given route_forward's own choice it writes
// the same bits. Its backward is route_backward with the routing map it wrote.
void route_forward_replayed(const RouterConfig& config, TensorView logits_TE, TensorView expert_bias_E,
                            TensorView experts_Tk, TensorView probs_TE, TensorView routing_map_TE, RouterSaved& saved);
// The record of a routing: each token's k chosen experts in increasing order, from a routing map ([T, E] u8),
// into experts_Tk (i32 or i64 [T, k]); the format route_forward_replayed takes.
void routed_experts(TensorView routing_map_TE, int64_t top_k, TensorView experts_Tk);
// dlogits_TE (overwritten) from dprobs_TE, with the forward's routing_map_TE and saved scores.
void route_backward(const RouterConfig& config, const RouterSaved& saved, TensorView routing_map_TE,
                    TensorView dprobs_TE, TensorView dlogits_TE);

}  // namespace rf::model
