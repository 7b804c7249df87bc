#include "model/moe_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace rf::model {

bool MoeConfig::is_moe_layer(int64_t layer) const {
  if (!enabled()) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

RouterConfig MoeConfig::router() const {
  // HF's order of operations: softmax over all experts, top-k of the probabilities, then the optional renormalisation.
  return RouterConfig{.num_experts = num_experts,
                      .top_k = num_experts_per_tok,
                      .score = RouterScore::softmax,
                      .pre_softmax = true,
                      .normalize_topk = norm_topk_prob};
}

void MoeConfig::validate(int64_t num_layers) const {
  if (!enabled()) return;
  router().validate("");
  if (moe_intermediate_size <= 0)
    throw ConfigError("moe_intermediate_size", fmt::format("must be positive, got {}", moe_intermediate_size));
  if (shared_expert_intermediate_size < 0)
    throw ConfigError("shared_expert_intermediate_size",
                      fmt::format("must be 0 (no shared expert) or positive, got {}", shared_expert_intermediate_size));
  if (shared_expert_gate && shared_expert_intermediate_size == 0)
    throw ConfigError("shared_expert_intermediate_size", "a shared expert gate needs a shared expert");
  if (decoder_sparse_step <= 0)
    throw ConfigError("decoder_sparse_step", fmt::format("must be positive, got {}", decoder_sparse_step));
  for (int64_t layer : mlp_only_layers)
    if (layer < 0 || layer >= num_layers)
      throw ConfigError("mlp_only_layers",
                        fmt::format("layer {} is not one of the model's {} layers", layer, num_layers));
  if (!(router_aux_loss_coef >= 0))
    throw ConfigError("router_aux_loss_coef", fmt::format("must be >= 0, got {}", router_aux_loss_coef));
}

}  // namespace rf::model
