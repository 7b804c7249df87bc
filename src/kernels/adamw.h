// AdamW (Loshchilov & Hutter), exactly as torch.optim.AdamW (non-amsgrad, non-foreach) orders it:
//   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Op for op as torch 1.13's _single_tensor_adamw: param.mul_(1 - lr wd);
// exp_avg.mul_(b1).add_(g, alpha=1 - b1); exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2);
// denom = (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps); param.addcdiv_(exp_avg, denom, value=-lr / bc1).
// Each op rounds in the params' dtype; the Python-float scalars are formed in f64 and rounded to
// that dtype; the two moment updates are FMAs (torch's vectorised add-with-alpha is one).
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
