// MoeConfig: the Mixture-of-Experts fields of a Hugging Face config.json (Qwen2-MoE, Qwen3-MoE), kept under HF's
// names; ModelConfig::from_json reads them, to_json writes them back. num_experts == 0 is a dense model.
// Which layers are MoE is HF's rule: layer l is sparse unless it is in mlp_only_layers, and when
// (l + 1) % decoder_sparse_step == 0; the other layers are the dense SwiGLU MLP of intermediate_size.
// The router (model/moe_router.h) is HF's: a softmax over all experts in f64 (HF: f32), its top-k, renormalised to
// sum 1 when norm_topk_prob. Qwen2-MoE adds a shared expert (a dense SwiGLU MLP of
// shared_expert_intermediate_size on every token) scaled by sigmoid(shared_expert_gate(x)).
// Legend: E experts, C hidden.
#pragma once

#include <cstdint>
#include <vector>

#include "model/moe_router.h"

namespace rf::model {

struct MoeConfig {
  int64_t num_experts = 0;  // E; 0: no MoE layers
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;  // each expert's FFN width
  bool norm_topk_prob = false;
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool shared_expert_gate = false;              // the shared expert's sigmoid gate [1, C] (Qwen2-MoE)
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // HF adds router_aux_loss_coef x its pooled load-balancing loss to the training loss when output_router_logits.
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;

  bool enabled() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  RouterConfig router() const;
  // Throws ConfigError naming the HF key; num_layers bounds mlp_only_layers.
  void validate(int64_t num_layers) const;
};

}  // namespace rf::model
