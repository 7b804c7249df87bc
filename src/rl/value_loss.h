// The critic's clipped value loss (verl core_algos.compute_value_loss):
//   v̂c = clamp(v̂, V - c, V + c)                      c = critic.cliprange_value
//   vf_loss = ½·aggregate(max((v̂ - G)², (v̂c - G)²))  G = the returns, V = the values at rollout
//   vf_clipfrac = masked_mean((v̂c - G)² > (v̂ - G)²)
// verl aggregates with the micro-batch's own counts only; with LossAggregation::global the loss
// is micro-batch- and DP-invariant instead (see agg_loss.h for why).
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include "core/tensor_view.h"
#include "rl/agg_loss.h"

namespace rf::rl {

struct ValueLossResult {
  double vf_loss = 0;
  double vf_clipfrac = 0;
};

ValueLossResult compute_value_loss(TensorView vpreds_BT, TensorView returns_BT, TensorView values_BT,
                                   TensorView response_mask_BT, double cliprange_value,
                                   const LossAggregation& aggregation);

}  // namespace rf::rl
