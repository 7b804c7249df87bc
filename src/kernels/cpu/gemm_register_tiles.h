// The register tiles of our own GEMM kernels, AVX2 and AVX-512 only, R rows held in registers:
//  - dot_block: out_RC = a_RK b_CK^T, both operands unit stride along K (the grouped forward's rows of x against
//    rows of w, unpacked); one vector accumulator per output, summed across its lanes at the end, the K % kLanes
//    tail in scalars;
//  - broadcast_block: acc_RS (= or +=) a_RK b_KS over S = V * kLanes columns of b (rows unit stride: packed, or
//    a strip of w in place), a read element by element at any strides; one fma per k per element, k ascending.
//    The ordered GEMM's tile (ordered_microkernel.h) and the grouped dgrad and wgrad (grouped_few_rows.cpp) are
//    this block.
// Everything is multiplied and added in f32, bf16 widened on load.
// In an unnamed namespace: each variant keeps its own copy (cpu_kernels.h).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "kernels/cpu/vec_f32.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX2__)

inline float to_f32(float x) { return x; }
using rf::to_f32;

// f(std::integral_constant<int64_t, rows>{}) for rows in 1..kMax: a register tile's height as a constant.
template <int64_t kMax, class F>
void with_rows(int64_t rows, const F& f) {
  [&]<int64_t... Rs>(std::integer_sequence<int64_t, Rs...>) {
    ((rows == Rs + 1 ? f(std::integral_constant<int64_t, Rs + 1>{}) : void()), ...);
  }(std::make_integer_sequence<int64_t, kMax>{});
}

template <int64_t R, int64_t C, class T>
void dot_block(const T* a, int64_t lda, const T* b, int64_t ldb, int64_t K, float* out, int64_t ld_out) {
  Vec acc[R][C];
#pragma GCC unroll 16
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int64_t c = 0; c < C; ++c) acc[r][c] = vec_zero();
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    Vec ak[R];
#pragma GCC unroll 16
    for (int64_t r = 0; r < R; ++r) ak[r] = vec_load(a + r * lda + k);
#pragma GCC unroll 16
    for (int64_t c = 0; c < C; ++c) {
      const Vec bk = vec_load(b + c * ldb + k);
#pragma GCC unroll 16
      for (int64_t r = 0; r < R; ++r) acc[r][c] = vec_fma(ak[r], bk, acc[r][c]);
    }
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      float sum = vec_sum(acc[r][c]);
      for (int64_t j = k; j < K; ++j) sum += to_f32(a[r * lda + j]) * to_f32(b[c * ldb + j]);
      out[r * ld_out + c] = sum;
    }
}

// b rows are ld_b apart (packed: S); acc holds R rows of S floats ld_acc apart; resume adds onto them, else
// they start at zero.
template <int64_t R, int64_t V, class Ta, class Tb>
void broadcast_block(const Ta* a, int64_t a_row, int64_t a_depth, const Tb* b, int64_t ld_b, int64_t K, float* acc,
                     int64_t ld_acc, bool resume) {
  Vec c[R][V];
#pragma GCC unroll 16
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < V; ++v) c[r][v] = resume ? vec_load(acc + r * ld_acc + v * kLanes) : vec_zero();
  for (int64_t k = 0; k < K; ++k, b += ld_b) {
    Vec bk[V];
#pragma GCC unroll 4
    for (int64_t v = 0; v < V; ++v) bk[v] = vec_load(b + v * kLanes);
#pragma GCC unroll 16
    for (int64_t r = 0; r < R; ++r) {
      const Vec ar = vec_set1(to_f32(a[r * a_row + k * a_depth]));
#pragma GCC unroll 4
      for (int64_t v = 0; v < V; ++v) c[r][v] = vec_fma(ar, bk[v], c[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < V; ++v) vec_store(acc + r * ld_acc + v * kLanes, c[r][v]);
}

#endif  // __AVX2__

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
