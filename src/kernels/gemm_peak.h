// The machine's measured GEMM rate, the denominator of MFU: the best of a few 1024^3 GEMMs in the
// compute dtype through the registry's fastest path (~50 ms).
#pragma once

#include "kernels/kernel_registry.h"

namespace rf::kernels {

double measure_gemm_peak_gflops(const KernelRegistry& kernels, DType dtype);

}  // namespace rf::kernels
