#include "rl/explained_variance.h"

#include <limits>

#include "rl/masked_stats.h"

namespace rf::rl {
namespace {

// torch.var(masked_select(x, mask)): the unbiased variance of the n masked elements, from masked sums.
double selected_variance(const Matrix& x, const Matrix& mask, double n) {
  const double mean = masked_sum(x, mask) / n;
  Matrix squared_deviation = x;
  for (double& v : squared_deviation.values) v = (v - mean) * (v - mean);
  return masked_sum(squared_deviation, mask) / (n - 1);
}

}  // namespace

double vf_explained_var(TensorView returns_BT, TensorView values_BT, TensorView response_mask_BT) {
  const Matrix returns = read_matrix(returns_BT, "returns_BT");
  const Matrix values = read_matrix(values_BT, "values_BT");
  const Matrix mask = read_mask(response_mask_BT, "response_mask_BT");
  check_same_shape(returns, "returns_BT", values, "values_BT");
  check_same_shape(returns, "returns_BT", mask, "response_mask_BT");
  const double n = masked_sum(mask, mask);
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  Matrix diff = returns;
  for (size_t i = 0; i < diff.values.size(); ++i) diff.values[i] -= values.values[i];
  return 1.0 - selected_variance(diff, mask, n) / (selected_variance(returns, mask, n) + kExplainedVarEps);
}

}  // namespace rf::rl
