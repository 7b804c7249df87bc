// AdamW (Loshchilov & Hutter), exactly as torch.optim.AdamW (non-amsgrad, non-foreach) orders it:
//   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Master weights, gradients and moments are f32 (f64 in tests). When `param_copy` is not empty the
// updated master weights are also written there in its dtype (the bf16 model weights).
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  int64_t step = 1;  // 1-based count of steps taken including this one (bias correction)
};

// All views contiguous with the same element count.
using AdamWStep = void(const AdamWParams&, TensorView param, TensorView grad, TensorView exp_avg,
                             TensorView exp_avg_sq, TensorView param_copy);
using AdamWStepFn = AdamWStep*;

}  // namespace rf::kernels
