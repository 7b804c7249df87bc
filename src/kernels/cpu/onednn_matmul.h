// Matrix products through oneDNN's matmul primitive on its CPU engine: the default engine of the cpu
// GEMM and linear kernels (f32, and bf16 where oneDNN has a bf16 kernel: avx512_core and up). Each operand's layout (row- or column-major, any leading dimension)
// goes to oneDNN as explicit strides, so transposed and strided views are used in place. oneDNN
// picks its own kernel for the CPU it runs on (brgemm with AVX512-BF16 where there is one),
// whichever of our ISA variants calls it.
// Legend: a_MK, b_KN, c_MN as in BLAS.
#pragma once

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_epilogue.h"

namespace rf::kernels::RF_CPU_NS {

// c_MN = alpha * a_MK b_KN + the epilogue's terms, products accumulated in f32.
// a and b: bf16 or f32 (one dtype); c: f32 or bf16. c has a unit inner stride, a and b a unit
// stride in one of their two dims. A oneDNN failure throws rf::Error naming the shapes, dtypes and ISA.
void onednn_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue);

}  // namespace rf::kernels::RF_CPU_NS
