// Which BLAS and oneDNN this build runs on, for the start-up line.
#pragma once

#include <string>

namespace rf::kernels {

std::string blas_info();  // "OpenBLAS 0.3.21 (OpenMP, core Haswell); oneDNN 2.6.3 (cpu isa avx512_core_bf16)"

}  // namespace rf::kernels
