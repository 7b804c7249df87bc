// Expert capacity, token dropping and padding (megatron.md §6.4, Megatron's apply_router_token_dropping), applied to
// the router's dense outputs (moe_router.h) before the dispatcher permutes by them.
//   capacity C = ceil(T * k / E * capacity_factor), T the local tokens (Megatron's get_capacity, no minimum);
//   when C >= T nothing is dropped; otherwise, per expert, the C tokens kept are the C highest probs (drop policy
//   `probs`) or the C earliest routed tokens (`position`), ties to the lower token index; a dropped (token, expert)
//   pair gets prob 0 and map 0;
//   pad_to_capacity: each expert's map column becomes that whole selection of min(C, T) tokens (Megatron's capacity
//   mask, filled up with unrouted tokens of prob 0, lowest index first), so every expert gets a static token count.
// Backward: the dispatcher sees the kept probs only, so the gradient of a dropped prob is 0 (Megatron multiplies the
// probs by the kept map). route_backward (moe_router.h) must get the router's PRE-drop routing map, with dprobs_TE
// zero at the dropped pairs: keep the router's map, and call mask_dropped_gradients(kept map, dprobs_TE) first.
// A padding pair (kept map 1, router map 0) may carry a gradient; route_backward ignores it (its prob is a constant 0).
// Not here: the dispatchers, the aux losses (they use the router's scores, not the dropped ones).
// Legend: T tokens, E experts, k = top_k, C capacity.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <string_view>

#include "core/tensor.h"

namespace rf::model {

enum class TokenDropPolicy : uint8_t { probs, position };
constexpr std::array<std::pair<TokenDropPolicy, std::string_view>, 2> enum_names(TokenDropPolicy) {
  return {{{TokenDropPolicy::probs, "probs"}, {TokenDropPolicy::position, "position"}}};
}

struct CapacityConfig {
  double capacity_factor = 0;                            // moe_expert_capacity_factor; 0: dropless (Megatron's None)
  TokenDropPolicy drop_policy = TokenDropPolicy::probs;  // moe_token_drop_policy
  bool pad_to_capacity = false;                          // moe_pad_expert_input_to_capacity
  bool dropless() const { return capacity_factor == 0; }
  // Throws rf::ConfigError naming `key_prefix` + the key. Megatron reads a negative factor as dropless; here that
  // is an error (0 says dropless), as is padding without a capacity, which Megatron refuses too.
  void validate(std::string_view key_prefix) const;
};

// ceil(num_tokens * top_k / num_experts * capacity_factor), in Megatron's order of f64 operations.
int64_t expert_capacity(int64_t num_tokens, int64_t top_k, int64_t num_experts, double capacity_factor);

// kept_probs_TE (f32/f64) and kept_map_TE (u8), written, from the router's probs_TE and routing_map_TE; the outputs
// may alias the inputs (in place) when the pre-drop map is not needed (no backward). Returns the number of dropped
// (token, expert) pairs (the moe/dropped_tokens metric). A dropless config copies.
int64_t apply_capacity(const CapacityConfig& config, int64_t top_k, TensorView probs_TE, TensorView routing_map_TE,
                       TensorView kept_probs_TE, TensorView kept_map_TE);

// dprobs_TE *= kept_map_TE: the chain rule through kept_probs = probs * kept_map, zeroing the dropped pairs.
void mask_dropped_gradients(TensorView kept_map_TE, TensorView dprobs_TE);

}  // namespace rf::model
