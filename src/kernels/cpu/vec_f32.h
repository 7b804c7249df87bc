// One f32 vector register of the variant's instruction set, for the register tiles of our own GEMM kernels
// (gemm_register_tiles.h): a zmm of 16 lanes on AVX-512, a ymm of 8 on AVX2. Empty on
// the generic variant, whose kernels are scalar. bf16 is widened to f32 on load (its bits are the top half of
// an f32), so the kernels multiply and add in f32 whatever the stored type.
// In an unnamed namespace: each variant keeps its own copy (cpu_kernels.h); inline, as a file uses a few.
#pragma once

#include <cstdint>

#include "core/dtype.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX512F__)
// GCC 12's widening, shift and extract intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
using Vec = __m512;
constexpr int64_t kLanes = 16;
inline Vec vec_zero() { return _mm512_setzero_ps(); }
inline Vec vec_load(const float* p) { return _mm512_loadu_ps(p); }
inline Vec vec_load(const bf16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
inline Vec vec_broadcast(const float* p) { return _mm512_set1_ps(*p); }
inline Vec vec_set1(float x) { return _mm512_set1_ps(x); }
inline Vec vec_fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline void vec_store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline float vec_sum(Vec v) { return _mm512_reduce_add_ps(v); }
#pragma GCC diagnostic pop
#elif defined(__AVX2__)
using Vec = __m256;
constexpr int64_t kLanes = 8;
inline Vec vec_zero() { return _mm256_setzero_ps(); }
inline Vec vec_load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec vec_load(const bf16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
inline Vec vec_broadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline Vec vec_set1(float x) { return _mm256_set1_ps(x); }
inline Vec vec_fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline void vec_store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline float vec_sum(Vec v) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}
#endif

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
