// The aux-loss-free expert bias (megatron.md §6.5, DeepSeek-V3): a non-trainable f32 bias per expert that steers
// the sigmoid router's choice (moe_router.h) toward underloaded experts. Each training forward adds the routing
// map's column sums to a counter; once per global batch the caller all-reduces the counters (tp-dp-cp in
// Megatron), then update_expert_bias moves every bias a fixed step toward balance and resets the counter:
//   bias_e += rate * sign(mean_e' count_e' - count_e)     (sign(0) = 0, as torch.sign)
// Not here: MPI, and the decision of which forwards count (training forwards only, not recomputation or eval).
// Legend: T tokens, E experts.
#pragma once

#include <string_view>

#include "core/tensor.h"
#include "model/moe_router.h"

namespace rf::model {

struct ExpertBiasConfig {
  bool enabled = false;       // moe_router_enable_expert_bias
  double update_rate = 1e-3;  // moe_router_bias_update_rate
  // Throws rf::ConfigError naming `key_prefix` + the key: the bias needs sigmoid scores and a positive rate.
  void validate(std::string_view key_prefix, RouterScore score) const;
};

// counts_E (+=, any numeric dtype; f64 or i64 sum exactly): the column sums of routing_map_TE over the rows with
// valid_T != 0 (u8; empty = every row), so padding tokens do not count.
void add_routed_counts(TensorView routing_map_TE, TensorView valid_T, TensorView counts_E);

// bias_E (f32) += rate * sign(mean(counts_E) - counts_E), in f32 as Megatron; then counts_E = 0.
void update_expert_bias(double update_rate, TensorView counts_E, TensorView bias_E);

}  // namespace rf::model
