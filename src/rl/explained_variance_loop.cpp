// Loop twin of vf_explained_var: verl's masked_select of the returns and values, then torch.var's
// two passes over the selected elements.
//
// Dimension legend: B batch (responses), T response tokens.
#include <limits>
#include <vector>

#include "rl/explained_variance.h"
#include "rl/matrix.h"

namespace rf::rl {
namespace {

double unbiased_variance(const std::vector<double>& x) {
  if (x.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / double(x.size());
  double squares = 0;
  for (double v : x) squares += (v - mean) * (v - mean);
  return squares / double(x.size() - 1);
}

}  // namespace

double vf_explained_var_loop(TensorView returns_BT, TensorView values_BT, TensorView response_mask_BT) {
  const Matrix returns = read_matrix(returns_BT, "returns_BT");
  const Matrix values = read_matrix(values_BT, "values_BT");
  const Matrix mask = read_mask(response_mask_BT, "response_mask_BT");
  check_same_shape(returns, "returns_BT", values, "values_BT");
  check_same_shape(returns, "returns_BT", mask, "response_mask_BT");
  std::vector<double> valid_returns, valid_diff;
  for (int64_t b = 0; b < returns.rows; ++b)
    for (int64_t t = 0; t < returns.cols; ++t)
      if (mask(b, t) != 0.0) {
        valid_returns.push_back(returns(b, t));
        valid_diff.push_back(returns(b, t) - values(b, t));
      }
  return 1.0 - unbiased_variance(valid_diff) / (unbiased_variance(valid_returns) + kExplainedVarEps);
}

}  // namespace rf::rl
