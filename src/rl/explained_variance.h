// critic/vf_explained_var, as verl's compute_data_metrics computes it (trainer/ppo/metric_utils.py):
//   G, V = masked_select(returns, response_mask), masked_select(values, response_mask)
//   vf_explained_var = 1 - var(G - V) / (var(G) + 1e-5)
// with torch.var's default, the unbiased variance (Σ(x - mean)² / (n - 1), mean = Σx / n) over the n
// masked elements. 1 when the values predict the returns exactly, 0 when they explain none of their
// variance, negative when they add variance. Fewer than 2 masked elements give NaN, as torch.var does.
// Computed in f64 (verl's tensors are f32).
// vf_explained_var works on masked sums over the (B, T) matrices; vf_explained_var_loop is its loop twin:
// verl's masked_select then torch.var, element by element (explained_variance_loop.cpp).
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include "core/tensor_view.h"

namespace rf::rl {

inline constexpr double kExplainedVarEps = 1e-5;  // verl's, added to var(G)

double vf_explained_var(TensorView returns_BT, TensorView values_BT, TensorView response_mask_BT);
double vf_explained_var_loop(TensorView returns_BT, TensorView values_BT, TensorView response_mask_BT);

}  // namespace rf::rl
