// The ordered GEMM: rlforge's own matrix product, whose arithmetic per output element is fixed by
// this contract and by nothing else (not M, not the blocking, not the thread count, not the ISA):
//
//   acc = +0;  for k = 0 .. K-1 ascending:  acc = fma(a_mk, b_kn, acc)       (one rounding per k, f32)
//   r = acc;  if alpha != 1: r = alpha * r;  if beta != 0: r = r + beta * c_mn;
//   if bias: r = r + bias_n;  if addend: r = r + addend_mn;  c_mn = r rounded once to c's dtype
//
// bf16 operands are widened to f32 exactly while packing (a bf16 product is exact in f32, so a bf16
// GEMM is the f32 GEMM of the widened values). Vectors run along n and the k loop is never split, so
// every variant (generic: libm's fmaf, exact on every x86-64; AVX2: 8 lanes; AVX-512: 16 lanes) and
// every row count give the same bits. That makes it the GEMM of a batch-invariant registry
// (KernelConfig::batch_invariant) and the bf16 GEMM of a CPU oneDNN 2.6 has no bf16 kernel for.
// Legend: a_MK, b_KN, c_MN as in BLAS.
#pragma once

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_epilogue.h"

namespace rf::kernels::RF_CPU_NS {

// c_MN = alpha * a_MK b_KN + the epilogue's terms, as the contract above says.
// a and b: f32 or bf16 (one dtype); c: f32 or bf16, unit inner stride; a and b a unit stride in one
// of their two dims (any leading dimension). The epilogue's bias has a's dtype, its addend c's.
void ordered_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue);

}  // namespace rf::kernels::RF_CPU_NS
