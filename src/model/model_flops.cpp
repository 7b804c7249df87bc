#include "model/model_flops.h"

namespace rf::model {

int64_t matmul_parameters(const ModelConfig& c) {
  const int64_t q_and_o = 2 * c.hidden_size * c.num_attention_heads * c.head_dim;
  const int64_t k_and_v = 2 * c.hidden_size * c.num_key_value_heads * c.head_dim;
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;  // gate, up, down
  // An MoE layer's a token meets: the router, its top-k experts and the shared expert (and its gate).
  const MoeConfig& moe = c.moe;
  const int64_t moe_mlp = c.hidden_size * (moe.num_experts + (moe.shared_expert_gate ? 1 : 0) +
                                           3 * (moe.num_experts_per_tok * moe.moe_intermediate_size +
                                                moe.shared_expert_intermediate_size));
  const int64_t head = c.hidden_size * (c.head == HeadKind::lm ? c.vocab_size : c.num_labels);
  int64_t layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) layers += q_and_o + k_and_v + (moe.is_moe_layer(l) ? moe_mlp : mlp);
  return layers + head;
}

double forward_flops(const ModelConfig& c, std::span<const int64_t> lengths) {
  const double weights = 2.0 * double(matmul_parameters(c));
  // q·k scores and the weighted sum of v over the causal half (T²/2 pairs): 2 multiply-adds per (pair, head
  // dimension), 2 FLOPs each.
  const double attention_per_pair = 4.0 * double(c.num_hidden_layers * c.num_attention_heads * c.head_dim);
  double flops = 0;
  for (const int64_t length : lengths) {
    const double T = double(length);
    flops += weights * T + attention_per_pair * T * T / 2.0;
  }
  return flops;
}

}  // namespace rf::model
