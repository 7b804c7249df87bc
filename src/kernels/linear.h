// Linear layers in Hugging Face weight layout (w_OI: out x in) and the general GEMM beneath them.
// Forward, input gradient (dgrad) and weight gradient (wgrad) are separate ops so that a schedule
// can run wgrad later (Megatron's delayed wgrad) and so that TP can put its communication between.
// Legend: N rows (tokens), I in-features, O out-features.
//
// Dtypes: (x, w, b, y) all f32, all f64, or all bf16 (bf16 products accumulate in f32). Gradients of
// parameters (dw, db) are f32 for f32/bf16 compute and f64 for f64 compute.
#pragma once

#include "core/tensor_view.h"
#include "kernels/accumulate.h"

namespace rf::kernels {

enum class Transpose : uint8_t { no, yes };

struct GemmParams {
  Transpose trans_a = Transpose::no;
  Transpose trans_b = Transpose::no;
  double alpha = 1.0;
  double beta = 0.0;  // 0: C is overwritten (never read); 1: C +=
};

// c_MN = alpha * op(a) * op(b) + beta * c_MN. 2-D views with unit inner stride and any row stride.
// Dtypes (a, b, c): (f64, f64, f64), (f32, f32, f32), (bf16, bf16, f32), (bf16, bf16, bf16).
using Gemm = void(const GemmParams&, TensorView a, TensorView b, TensorView c);
using GemmFn = Gemm*;

// y_NO = x_NI * w_OI^T (+ b_O when b_O is not empty).
using LinearForward = void(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO);
using LinearForwardFn = LinearForward*;
// y_NO = resid_NO + x_NI * w_OI^T: a linear layer whose output joins the residual stream, with the
// add in the GEMM's epilogue (one rounding; the residual is read once, never copied into y first).
// The backward is linear_dgrad / linear_wgrad: the residual's gradient is y's.
using LinearResidualForward = void(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO);
using LinearResidualForwardFn = LinearResidualForward*;
// dx_NI (= or +=) dy_NO * w_OI.
using LinearDgrad = void(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode);
using LinearDgradFn = LinearDgrad*;
// dw_OI (= or +=, mode) dy_NO^T * x_NI; db_O likewise with the sum over N of dy_NO (when db_O is not
// empty). Overwriting serves the first micro-batch after the gradients were zeroed: the GEMM then
// neither reads dw nor needs a separate zeroing pass (oneDNN's accumulate, a `sum` post-op, costs
// 5-10% on these transposed-operand shapes).
using LinearWgrad = void(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode);
using LinearWgradFn = LinearWgrad*;

}  // namespace rf::kernels
