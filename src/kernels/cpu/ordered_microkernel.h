// The register tile of the ordered GEMM (ordered_gemm.h): acc_RC = (acc_RC or 0) + a_RK b_KC over a
// packed micro-panel of a (kMr rows, k-major: a[k * kMr + i]) and one of b (kNr columns, k-major:
// b[k * kNr + j]), one fma per k per element, k ascending. Vectors run along the columns only, so an
// element's arithmetic does not depend on the vector width; the tile shape is each instruction
// set's own (it changes which elements share registers, never an element's sum).
// In an unnamed namespace: each variant keeps its own copy (cpu_kernels.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/gemm_register_tiles.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX512F__)
// 24 accumulators + 2 b vectors + 1 broadcast of the 32 zmm registers.
constexpr int64_t kMr = 12, kNr = 32;
#elif defined(__AVX2__)
// 12 accumulators + 2 b vectors + 1 broadcast of the 16 ymm registers.
constexpr int64_t kMr = 6, kNr = 16;
#endif

#if defined(__AVX2__)
// a[k * kMr + i] is element (i, k): a block over a packed panel, bit for bit the contract's fma chain.
void ordered_tile(int64_t kc, const float* a, const float* b, float* acc, int64_t ld_acc, bool resume) {
  broadcast_block<kMr, kNr / kLanes>(a, 1, kMr, b, kNr, kc, acc, ld_acc, resume);
}

#else
// Baseline x86-64 has no fma instruction: libm's fmaf is the exactly rounded fused operation on every
// CPU (glibc picks the FMA instruction at run time where there is one, an exact emulation elsewhere),
// so this variant computes the same bits as the vector ones, slowly. It serves CPUs without AVX2.
constexpr int64_t kMr = 4, kNr = 8;

void ordered_tile(int64_t kc, const float* a, const float* b, float* acc, int64_t ld_acc, bool resume) {
  float c[kMr][kNr];
  for (int64_t i = 0; i < kMr; ++i)
    for (int64_t j = 0; j < kNr; ++j) c[i][j] = resume ? acc[i * ld_acc + j] : 0.0f;
  for (int64_t k = 0; k < kc; ++k, a += kMr, b += kNr)
    for (int64_t i = 0; i < kMr; ++i)
      for (int64_t j = 0; j < kNr; ++j) c[i][j] = std::fmaf(a[i], b[j], c[i][j]);
  for (int64_t i = 0; i < kMr; ++i)
    for (int64_t j = 0; j < kNr; ++j) acc[i * ld_acc + j] = c[i][j];
}
#endif

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
