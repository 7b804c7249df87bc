#include "model/moe_expert_bias.h"

#include <cmath>

#include "core/element_access.h"
#include "core/error.h"

namespace rf::model {

void ExpertBiasConfig::validate(std::string_view prefix, RouterScore score) const {
  if (!enabled) return;
  const std::string p(prefix);
  if (score != RouterScore::sigmoid)
    throw ConfigError(p + "moe_router_enable_expert_bias", "the expert bias needs sigmoid router scores");
  if (!(std::isfinite(update_rate) && update_rate > 0))
    throw ConfigError(p + "moe_router_bias_update_rate", fmt::format("must be positive, got {}", update_rate));
}

void add_routed_counts(TensorView routing_map_TE, TensorView valid_T, TensorView counts_E) {
  RF_CHECK(routing_map_TE.rank() == 2, "expert bias: routing_map_TE must be [T, E], got {}", routing_map_TE.describe());
  const int64_t T = routing_map_TE.size(0), E = routing_map_TE.size(1);
  check_shape(counts_E, {E}, "counts_E");
  RF_CHECK(valid_T.empty() || (valid_T.rank() == 1 && valid_T.size(0) == T),
           "expert bias: valid_T must be empty or [{}], got {}", T, valid_T.describe());
  for (int64_t e = 0; e < E; ++e) {
    double sum = 0;
    for (int64_t t = 0; t < T; ++t)
      if (valid_T.empty() || load_f64(valid_T, t * valid_T.stride(0)) != 0)
        sum += load_f64(routing_map_TE, t * routing_map_TE.stride(0) + e * routing_map_TE.stride(1)) != 0;
    store_f64(counts_E, e * counts_E.stride(0), load_f64(counts_E, e * counts_E.stride(0)) + sum);
  }
}

void update_expert_bias(double update_rate, TensorView counts_E, TensorView bias_E) {
  RF_CHECK(counts_E.rank() == 1, "expert bias: counts_E must be [E], got {}", counts_E.describe());
  const int64_t E = counts_E.size(0);
  check_shape(bias_E, {E}, "bias_E");
  check_dtype(bias_E, DType::f32, "bias_E");
  double total = 0;
  for (int64_t e = 0; e < E; ++e) total += load_f64(counts_E, e * counts_E.stride(0));
  const double mean = total / double(E);
  // Megatron: bias + sign(mean - count) * rate, every operand f32; sign * rate is exactly +-float(rate) or 0.
  const float step = float(update_rate);
  float* bias = bias_E.data<float>();
  for (int64_t e = 0; e < E; ++e) {
    const double gap = mean - load_f64(counts_E, e * counts_E.stride(0));
    bias[e * bias_E.stride(0)] += gap > 0 ? step : gap < 0 ? -step : 0.0f;
    store_f64(counts_E, e * counts_E.stride(0), 0.0);
  }
}

}  // namespace rf::model
