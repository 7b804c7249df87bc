// Which BLAS and oneDNN this build runs on, for the start-up line.
#pragma once

#include <string>

namespace rf::kernels {

std::string blas_info();  // "OpenBLAS 0.3.21 (OpenMP, core Haswell); oneDNN 2.6.3 (cpu isa avx512_core_bf16)"

// OpenBLAS's kernel set ("Haswell", "SkylakeX", ...): what OPENBLAS_CORETYPE and the CPU leave it.
std::string blas_core_name();

// oneDNN's effective ISA ("avx2", "avx512_core_amx", ...): what ONEDNN_MAX_CPU_ISA and the CPU leave it.
std::string onednn_isa_name();

// Whether oneDNN has a bf16 matmul kernel on this CPU: 2.6 has none below avx512_core (it throws
// "could not create a primitive descriptor iterator"). Follows ONEDNN_MAX_CPU_ISA.
bool onednn_has_bf16_matmul();

}  // namespace rf::kernels
