// RMSNorm as Hugging Face Llama/Qwen compute it: y = w * (x * rstd), rstd = 1/sqrt(mean(x^2) + eps),
// statistics in f32 (f64 for f64 input); for bf16 the normalised x is rounded to bf16 before the
// gain multiplies it, as HF's `weight * hidden.to(input_dtype)` does.
// Also serves Qwen3's per-head q_norm/k_norm: view q_NHD as rows of D.
//
// Backward (xhat = x * rstd, g = dy * w):
//   dx = rstd * (g - xhat * mean(g * xhat)),   dw += sum over rows of dy * xhat,
// with xhat unrounded (f32) for bf16 too.
// Legend: N rows, C normalised dim.
#pragma once

#include "core/tensor_view.h"
#include "kernels/accumulate.h"

namespace rf::kernels {

struct RmsNormParams {
  double eps = 1e-6;
};

// Exactly what backward needs. rstd_N is f32 (f64 for f64 input), sized by the caller.
struct RmsNormSaved {
  TensorView rstd_N;
};

using RmsNormForward = void(const RmsNormParams&, TensorView x_NC, TensorView w_C, TensorView y_NC,
                                  RmsNormSaved& saved);
using RmsNormForwardFn = RmsNormForward*;
// dx_NC = or += (mode); dw_C += (f32 for f32/bf16, f64 for f64).
using RmsNormBackward = void(const RmsNormParams&, TensorView dy_NC, TensorView x_NC, TensorView w_C,
                                   const RmsNormSaved& saved, TensorView dx_NC, TensorView dw_C,
                                   Accumulate mode);
using RmsNormBackwardFn = RmsNormBackward*;

}  // namespace rf::kernels
