// What a matrix product adds after the sum of products, before c is rounded once: shared by the
// two GEMM engines under the cpu kernels (oneDNN's matmul, onednn_matmul.h, and our own ordered
// GEMM, ordered_gemm.h), so the linear ops hand both the same description.
// Legend: c_MN as in BLAS.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels::RF_CPU_NS {

struct MatmulEpilogue {
  TensorView bias_N;     // on every row, when not empty (a's dtype)
  TensorView addend_MN;  // elementwise, when not empty (c's dtype, unit inner stride; may not alias c)
  float beta = 0.0f;     // + beta * c_MN (c is not read when 0)
};

}  // namespace rf::kernels::RF_CPU_NS
