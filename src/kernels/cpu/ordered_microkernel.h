// The register tile of the ordered GEMM (ordered_gemm.h): acc_RC = (acc_RC or 0) + a_RK b_KC over a
// packed micro-panel of a (kMr rows, k-major: a[k * kMr + i]) and one of b (kNr columns, k-major:
// b[k * kNr + j]), one fma per k per element, k ascending. Vectors run along the columns only, so an
// element's arithmetic does not depend on the vector width; the tile shape is each instruction
// set's own (it changes which elements share registers, never an element's sum).
// In an unnamed namespace: each variant keeps its own copy (cpu_kernels.h).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX512F__)
// 24 accumulators + 2 b vectors + 1 broadcast of the 32 zmm registers.
using Vec = __m512;
constexpr int64_t kLanes = 16, kMr = 12, kNr = 32;
Vec vec_zero() { return _mm512_setzero_ps(); }
Vec vec_load(const float* p) { return _mm512_loadu_ps(p); }
Vec vec_broadcast(const float* p) { return _mm512_set1_ps(*p); }
Vec vec_fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
void vec_store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
#elif defined(__AVX2__)
// 12 accumulators + 2 b vectors + 1 broadcast of the 16 ymm registers.
using Vec = __m256;
constexpr int64_t kLanes = 8, kMr = 6, kNr = 16;
Vec vec_zero() { return _mm256_setzero_ps(); }
Vec vec_load(const float* p) { return _mm256_loadu_ps(p); }
Vec vec_broadcast(const float* p) { return _mm256_broadcast_ss(p); }
Vec vec_fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
void vec_store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
#endif

#if defined(__AVX2__)
constexpr int64_t kVecs = kNr / kLanes;

void ordered_tile(int64_t kc, const float* a, const float* b, float* acc, int64_t ld_acc, bool resume) {
  Vec c[kMr][kVecs];
#pragma GCC unroll 16
  for (int64_t i = 0; i < kMr; ++i)
#pragma GCC unroll 2
    for (int64_t v = 0; v < kVecs; ++v) c[i][v] = resume ? vec_load(acc + i * ld_acc + v * kLanes) : vec_zero();
  for (int64_t k = 0; k < kc; ++k, a += kMr, b += kNr) {
    Vec bk[kVecs];
#pragma GCC unroll 2
    for (int64_t v = 0; v < kVecs; ++v) bk[v] = vec_load(b + v * kLanes);
#pragma GCC unroll 16
    for (int64_t i = 0; i < kMr; ++i) {
      const Vec ai = vec_broadcast(a + i);
#pragma GCC unroll 2
      for (int64_t v = 0; v < kVecs; ++v) c[i][v] = vec_fma(ai, bk[v], c[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < kMr; ++i)
#pragma GCC unroll 2
    for (int64_t v = 0; v < kVecs; ++v) vec_store(acc + i * ld_acc + v * kLanes, c[i][v]);
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
