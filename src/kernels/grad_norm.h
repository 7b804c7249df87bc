// Pieces of global gradient-norm clipping: the caller sums `sum_squares` over its tensors, reduces
// the sum over the model-parallel ranks, and scales every gradient by `clip_coefficient`
// (torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), never above 1).
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

// Sum of squares in f64, whatever the dtype (f32, bf16, f64); any strides.
using SumSquares = double(TensorView x);
using SumSquaresFn = SumSquares*;
// x *= factor, in place.
using Scale = void(TensorView x, double factor);
using ScaleFn = Scale*;

inline double clip_coefficient(double total_norm, double max_norm) {
  const double coefficient = max_norm / (total_norm + 1e-6);
  return coefficient < 1.0 ? coefficient : 1.0;
}

}  // namespace rf::kernels
