// Matrix products through oneDNN's matmul primitive on its CPU engine: the bf16 path of the cpu
// GEMM and linear kernels. Each operand's layout (row- or column-major, any leading dimension)
// goes to oneDNN as explicit strides, so transposed and strided views are used in place. oneDNN
// picks its own kernel for the CPU it runs on (brgemm with AVX512-BF16 where there is one),
// whichever of our ISA variants calls it.
// Legend: a_MK, b_KN, c_MN as in BLAS.
#pragma once

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

// c_MN = alpha * a_MK b_KN (+ bias_N on every row when bias_N is not empty) + beta * c_MN, with
// products accumulated in f32 and c rounded once; c is not read when beta == 0.
// a, b and bias: bf16 or f32 (one dtype); c: f32 or bf16. c and bias have a unit inner stride,
// a and b a unit stride in one of their two dims.
void onednn_matmul(TensorView a_MK, TensorView b_KN, TensorView bias_N, TensorView c_MN, float alpha, float beta);

}  // namespace rf::kernels::RF_CPU_NS
