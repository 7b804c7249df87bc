// Matrix products through oneDNN's matmul primitive on its CPU engine: the bf16 path of the cpu
// GEMM and linear kernels. Each operand's layout (row- or column-major, any leading dimension)
// goes to oneDNN as explicit strides, so transposed and strided views are used in place. oneDNN
// picks its own kernel for the CPU it runs on (brgemm with AVX512-BF16 where there is one),
// whichever of our ISA variants calls it.
// Legend: a_MK, b_KN, c_MN as in BLAS.
#pragma once

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

// What oneDNN adds to the product in its epilogue, before c is rounded once.
struct MatmulEpilogue {
  TensorView bias_N;     // on every row, when not empty (a's dtype)
  TensorView addend_MN;  // elementwise, when not empty (c's dtype, unit inner stride; may not alias c)
  float beta = 0.0f;     // + beta * c_MN (c is not read when 0)
};

// c_MN = alpha * a_MK b_KN + the epilogue's terms, products accumulated in f32.
// a and b: bf16 or f32 (one dtype); c: f32 or bf16. c has a unit inner stride, a and b a unit
// stride in one of their two dims.
void onednn_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue);

}  // namespace rf::kernels::RF_CPU_NS
