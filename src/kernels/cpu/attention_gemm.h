// The register-blocked GEMM tiles of the cpu attention kernel (attention.cpp): C (+)= A B on packed
// tiles, every column block of C on the vector lanes, A broadcast one "word" at a time. A word is
// one f32, or in the bf16 format a pair of bf16 that are consecutive along the reduction dim: the
// unit _mm512_dpbf16_ps multiplies and adds into one f32 lane, so B tiles store their rows
// interleaved in pairs (the packing is in attention_tiles.h). A per-block BlockRange lets the caller
// skip what a causal mask leaves out.
//   F32x16 (AVX-512F), F32x8 (AVX2 + FMA) and F32x4 (SSE2, baseline x86-64): f32 microkernels,
//   R rows x NV vectors of accumulators in registers; Bf16Pairs (AVX512-BF16): the same blocks on
//   _mm512_dpbf16_ps, f32 accumulation. One block template serves them all.
// An AMX path (_tile_dpbf16ps on 16x32 tiles) would be another format here with the same packing
// (AMX takes B in the same pair-interleaved layout); this CPU (Zen 4) has AVX512-BF16 but no AMX.
// Not here: any knowledge of attention (masks, softmax); the caller passes plain strided operands
// and, where a mask leaves part of the product unused, a range per block of rows.
// Legend: M rows of C, N its columns (a multiple of kLaneBlock), W words of the reduction dim;
// R, NV the rows and vectors of one register block.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/dtype.h"

#ifndef RF_CPU_NS
#error "attention_gemm.h is for the cpu kernels, compiled with RF_CPU_NS set"
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

// Dims that run along the vector lanes are padded to this (the widest vector's f32 lanes).
constexpr int64_t kLaneBlock = 16;

// What a GEMM does with C: overwrite it, add to it, or scale its rows first (C = diag(s) C + AB,
// the online softmax's rescale of the output accumulator).
enum class Out : uint8_t { overwrite, accumulate, scale_rows };

// A(i, w) is the word at a + (i * row + w * word) words; B(w, :) the N lanes at b + w * ld words;
// C(i, :) the N floats at c + i * ld.
template <class Elem>
struct WordsA {
  const Elem* a;
  int64_t row, word;
};
template <class Elem>
struct LanesB {
  const Elem* b;
  int64_t ld;
};
struct TileC {
  float* c;
  int64_t ld;
  const float* row_scale = nullptr;  // M factors, for Out::scale_rows
};

#if defined(__AVX512F__)
struct F32x16 {
  using Elem = float;
  using V = __m512;
  using A = __m512;
  using B = __m512;
  static constexpr int64_t kPack = 1, kWidth = 16;
  static constexpr int kRows = 4, kVecs = 4;  // 16 accumulators + 4 B vectors + 1 broadcast of 32 registers
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V mul(V x, V y) { return _mm512_mul_ps(x, y); }
  static V splat(float x) { return _mm512_set1_ps(x); }
  static A broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static B load_b(const float* p) { return _mm512_loadu_ps(p); }
  static V madd(V acc, A a, B b) { return _mm512_fmadd_ps(a, b, acc); }
};
#endif

#if defined(__AVX512BF16__)
// One word = two bf16. Each bf16 x bf16 product is exact in f32 and the sums are f32, as with the f32
// FMA kernel (dpbf16 also treats denormal inputs as zero and flushes denormal results: nothing next
// to the sums it adds to).
struct Bf16Pairs {
  using Elem = bf16;
  using V = __m512;
  using A = __m512bh;
  using B = __m512bh;
  static constexpr int64_t kPack = 2, kWidth = 16;
  static constexpr int kRows = 4, kVecs = 4;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V mul(V x, V y) { return _mm512_mul_ps(x, y); }
  static V splat(float x) { return _mm512_set1_ps(x); }
  static A broadcast(const bf16* p) {
    int32_t word;
    std::memcpy(&word, p, sizeof(word));
    return (__m512bh)_mm512_set1_epi32(word);
  }
  static B load_b(const bf16* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static V madd(V acc, A a, B b) { return _mm512_dpbf16_ps(acc, a, b); }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
struct F32x8 {
  using Elem = float;
  using V = __m256;
  using A = __m256;
  using B = __m256;
  static constexpr int64_t kPack = 1, kWidth = 8;
  static constexpr int kRows = 4, kVecs = 2;  // 8 accumulators + 2 B vectors + 1 broadcast of 16 registers
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V mul(V x, V y) { return _mm256_mul_ps(x, y); }
  static V splat(float x) { return _mm256_set1_ps(x); }
  static A broadcast(const float* p) { return _mm256_set1_ps(*p); }
  static B load_b(const float* p) { return _mm256_loadu_ps(p); }
  static V madd(V acc, A a, B b) { return _mm256_fmadd_ps(a, b, acc); }
};
#endif

// Baseline x86-64 (SSE2, no FMA): a multiply and an add per multiply-add.
struct F32x4 {
  using Elem = float;
  using V = __m128;
  using A = __m128;
  using B = __m128;
  static constexpr int64_t kPack = 1, kWidth = 4;
  static constexpr int kRows = 4, kVecs = 2;  // 8 accumulators + 2 B vectors + 1 broadcast of 16 registers
  static V zero() { return _mm_setzero_ps(); }
  static V load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, V x) { _mm_storeu_ps(p, x); }
  static V mul(V x, V y) { return _mm_mul_ps(x, y); }
  static V splat(float x) { return _mm_set1_ps(x); }
  static A broadcast(const float* p) { return _mm_set1_ps(*p); }
  static B load_b(const float* p) { return _mm_loadu_ps(p); }
  static V madd(V acc, A a, B b) { return _mm_add_ps(acc, _mm_mul_ps(a, b)); }
};

// The part of a block of rows of C that a causal mask leaves: columns from `column` (the masked ones
// before it are left as they are: the caller masks them), and words [word_begin, word_end) of the
// reduction (the others only meet zeros).
struct BlockRange {
  int64_t column = 0, word_begin = 0, word_end = std::numeric_limits<int64_t>::max();
};
struct FullRange {
  BlockRange operator()(int64_t /*i0*/, int64_t /*rows*/) const { return {}; }
};

// One R x (NV vectors) block of C, accumulated in registers over all W words.
template <class Ops, Out kOut, int R, int NV>
void gemm_block(WordsA<typename Ops::Elem> a, LanesB<typename Ops::Elem> b, int64_t W, TileC c) {
  constexpr int64_t P = Ops::kPack, kWidth = Ops::kWidth;
  typename Ops::V acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) {
      if constexpr (kOut == Out::overwrite) {
        acc[i][k] = Ops::zero();
      } else if constexpr (kOut == Out::accumulate) {
        acc[i][k] = Ops::load(c.c + i * c.ld + k * kWidth);
      } else {
        acc[i][k] = Ops::mul(Ops::load(c.c + i * c.ld + k * kWidth), Ops::splat(c.row_scale[i]));
      }
    }
  }
  for (int64_t w = 0; w < W; ++w) {
    typename Ops::B lanes[NV];
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) lanes[k] = Ops::load_b(b.b + (w * b.ld + k * kWidth) * P);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const typename Ops::A word = Ops::broadcast(a.a + (i * a.row + w * a.word) * P);
#pragma GCC unroll 8
      for (int k = 0; k < NV; ++k) acc[i][k] = Ops::madd(acc[i][k], word, lanes[k]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) Ops::store(c.c + i * c.ld + k * kWidth, acc[i][k]);
  }
}

template <class Ops>
using GemmBlockFn = void (*)(WordsA<typename Ops::Elem>, LanesB<typename Ops::Elem>, int64_t, TileC);

// Every block shape up to kRows x kVecs, indexed [R - 1][NV - 1], so edges run the same code.
template <class Ops, Out kOut, int... I>
constexpr std::array<GemmBlockFn<Ops>, sizeof...(I)> make_block_table(std::integer_sequence<int, I...>) {
  return {&gemm_block<Ops, kOut, I / Ops::kVecs + 1, I % Ops::kVecs + 1>...};
}

// C (M x N) (+)= A (M x W words) B (W words x N), N a multiple of Ops::kWidth; range(i0, rows) trims
// each block of rows (see BlockRange). Column blocks outer, so one block of B stays in L1 while every
// row of A streams past it.
template <class Ops, Out kOut, class Range = FullRange>
void gemm(WordsA<typename Ops::Elem> a, LanesB<typename Ops::Elem> b, int64_t W, TileC c, int64_t M, int64_t N,
          const Range& range = {}) {
  static constexpr auto kBlocks =
      make_block_table<Ops, kOut>(std::make_integer_sequence<int, Ops::kRows * Ops::kVecs>());
  constexpr int64_t kBlockWidth = Ops::kVecs * Ops::kWidth, P = Ops::kPack;
  for (int64_t j0 = 0; j0 < N; j0 += kBlockWidth) {
    const int64_t j_end = std::min(N, j0 + kBlockWidth);
    for (int64_t i0 = 0; i0 < M; i0 += Ops::kRows) {
      const int64_t rows = std::min<int64_t>(Ops::kRows, M - i0);
      const BlockRange r = range(i0, rows);
      const int64_t j_begin = std::max(j0, r.column / Ops::kWidth * Ops::kWidth);
      const int64_t w_begin = r.word_begin, w_end = std::min(W, r.word_end);
      if (j_begin >= j_end) continue;
      const WordsA<typename Ops::Elem> a_block{a.a + (i0 * a.row + w_begin * a.word) * P, a.row, a.word};
      const LanesB<typename Ops::Elem> b_block{b.b + (w_begin * b.ld + j_begin) * P, b.ld};
      const TileC c_block{c.c + i0 * c.ld + j_begin, c.ld, c.row_scale ? c.row_scale + i0 : nullptr};
      kBlocks[size_t((rows - 1) * Ops::kVecs + (j_end - j_begin) / Ops::kWidth - 1)](
          a_block, b_block, std::max<int64_t>(0, w_end - w_begin), c_block);
    }
  }
}

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
