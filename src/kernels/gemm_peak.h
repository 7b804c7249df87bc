// The machine's measured GEMM rate, the denominator of MFU: the best of a few 2048^3 GEMMs through
// each engine the cpu kernels can use (f32: oneDNN, OpenBLAS and the ordered GEMM; bf16: oneDNN where
// it has a bf16 kernel, and the ordered GEMM), on the fastest cpu variant this CPU runs. ~1.5 s for f32
// (17 GFLOP per call).
#pragma once

#include <algorithm>

#include "kernels/kernel_registry.h"

namespace rf::kernels {

struct GemmPeak {
  double onednn_gflops = 0.0;    // 0 for bf16 where oneDNN has no bf16 kernel
  double openblas_gflops = 0.0;  // 0 for bf16: OpenBLAS does not run our bf16 GEMMs
  double ordered_gflops = 0.0;
  double best() const { return std::max({onednn_gflops, openblas_gflops, ordered_gflops}); }
};

GemmPeak measure_gemm_peak(DType dtype);

}  // namespace rf::kernels
