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

// The table with the GEMM-backed ops (gemm, linear, grouped GEMM) on OpenBLAS for f32, and on the ordered GEMM;
// table() has them on oneDNN (KernelConfig picks per dtype).
const KernelTable& openblas_table();
const KernelTable& ordered_table();
}  // namespace rf::kernels::RF_CPU_NS
