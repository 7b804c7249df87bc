// The fast `cpu` kernels. Every file in cpu/ is compiled once per instruction set, each time into
// its own namespace: RF_CPU_NS is cpu_generic (baseline x86-64), cpu_avx2 (AVX2+FMA+F16C) or
// cpu_avx512 (AVX-512 F/BW/VL/DQ/BF16). Write portable loops the compiler vectorises, or
// intrinsics guarded by the matching __AVX512F__ / __AVX2__ macros.
//
// Keep hot code out of inline functions shared with other translation units (beyond trivially
// inlined ones): the linker keeps one copy of such a function for all variants, so an AVX-512
// instance could end up in the generic path. Helpers go in this namespace or an unnamed one.
#pragma once

#include "kernels/kernel_table.h"

#ifndef RF_CPU_NS
#error "cpu kernels are compiled with RF_CPU_NS set to their variant namespace"
#endif

namespace rf::kernels::RF_CPU_NS {
#include "kernels/variant_ops.h"

// The GEMM-backed ops on a chosen library for f32 products (bf16 always runs on oneDNN): the
// ops above are the oneDNN instances; openblas_table() swaps in the OpenBLAS ones
// (KernelConfig::f32_gemm).
template <GemmLibrary library>
void gemm_with(const GemmParams& p, TensorView a, TensorView b, TensorView c);
template <GemmLibrary library>
void linear_forward_with(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO);
template <GemmLibrary library>
void linear_residual_forward_with(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO);
template <GemmLibrary library>
void linear_dgrad_with(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode);
template <GemmLibrary library>
void linear_wgrad_with(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode);
}  // namespace rf::kernels::RF_CPU_NS
