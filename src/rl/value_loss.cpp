#include "rl/value_loss.h"

#include <algorithm>

#include "rl/masked_stats.h"

namespace rf::rl {

ValueLossResult compute_value_loss(TensorView vpreds_BT, TensorView returns_BT, TensorView values_BT,
                                   TensorView response_mask_BT, double cliprange_value,
                                   const LossAggregation& aggregation) {
  const Matrix vpreds = read_matrix(vpreds_BT, "vpreds_BT");
  const Matrix returns = read_matrix(returns_BT, "returns_BT");
  const Matrix values = read_matrix(values_BT, "values_BT");
  const Matrix mask = read_mask(response_mask_BT, "response_mask_BT");
  check_same_shape(vpreds, "vpreds_BT", returns, "returns_BT");
  check_same_shape(vpreds, "vpreds_BT", values, "values_BT");
  check_same_shape(vpreds, "vpreds_BT", mask, "response_mask_BT");
  Matrix loss(vpreds.rows, vpreds.cols, vpreds.dtype), clipped(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    // verl's clip_by_value: max(min(x, hi), lo), bounds formed in the values' dtype.
    const double lo = round_to(values.dtype, values.values[i] - cliprange_value);
    const double hi = round_to(values.dtype, values.values[i] + cliprange_value);
    const double vpred_clipped = std::max(std::min(vpreds.values[i], hi), lo);
    const double unclipped_loss = (vpreds.values[i] - returns.values[i]) * (vpreds.values[i] - returns.values[i]);
    const double clipped_loss = (vpred_clipped - returns.values[i]) * (vpred_clipped - returns.values[i]);
    clipped.values[i] = clipped_loss > unclipped_loss ? 1.0 : 0.0;
    loss.values[i] = std::max(unclipped_loss, clipped_loss);
  }
  return {0.5 * aggregation.aggregate(loss, mask), masked_mean(clipped, mask)};
}

}  // namespace rf::rl
