// The machine's measured GEMM rate, the denominator of MFU: the best of a few 2048^3 GEMMs through
// each library the cpu kernels can use (f32: oneDNN and OpenBLAS; bf16: oneDNN), on the fastest
// cpu variant this CPU runs. ~1 s for f32 (17 GFLOP per call), half that for bf16.
#pragma once

#include "kernels/kernel_registry.h"

namespace rf::kernels {

struct GemmPeak {
  double onednn_gflops = 0.0;
  double openblas_gflops = 0.0;  // 0 for bf16: OpenBLAS does not run our bf16 GEMMs
  double best() const { return onednn_gflops > openblas_gflops ? onednn_gflops : openblas_gflops; }
};

GemmPeak measure_gemm_peak(DType dtype);

}  // namespace rf::kernels
