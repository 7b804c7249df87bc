// The softmax steps of the cpu attention kernel (attention.cpp) on one score tile: S^T, keys on the
// rows (c) and a panel's query rows on the lanes (j), row stride kPanel. The forward folds a tile into
// the running max and sum of each query row (flash-attention 2's online softmax) and turns the scores
// into probabilities; the backward turns recomputed scores into P^T and dP^T into dS^T. Both mask by
// a visible-key count per lane (a lane sees keys c < n[j]), and leave the results where the next
// GEMM reads them: in place for f32 tiles, as bf16 rows or row pairs for dpbf16.
// A portable version (the generic and AVX2 builds, whose tiles are f32) and an AVX-512 one (16 lanes
// in registers, the bf16 conversions fused in). Included by attention.cpp only.
// Legend: c a key of the tile, j a lane of the panel, L the panel's lanes, nk the tile's keys.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/elementwise.h"

#ifndef RF_CPU_NS
#error "attention_softmax.h is for the cpu kernels, compiled with RF_CPU_NS set"
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// max(x, y) as a bit-select, so the loops using it vectorise (see `select`).
float max_of(float x, float y) { return select(x > y, x, y); }

// Folds one key tile's scores s (rows c < nk, lanes j < L, unscaled) into the running max m and
// sum l of each lane, and turns them in place into probabilities exp(scale s - m), zero where key
// c is masked (c >= n[j]); alpha = exp(m_old - m_new) rescales what the output accumulated so far.
// The sum takes the probabilities before any bf16 rounding (kRound: f32 tiles of bf16 tensors), as
// flash-attention's does. One block of kLaneBlock lanes at a time, so its running values stay in
// registers while the rows stream past.
template <bool kRound>
void online_softmax(float* s, int32_t nk, int64_t L, const int32_t* n, float scale, float* m, float* l, float* alpha) {
  for (int64_t j0 = 0; j0 < L; j0 += kLaneBlock) {
    float tile_max[kLaneBlock], m_new[kLaneBlock], sum[kLaneBlock];
    const int32_t* visible = n + j0;
    std::fill(tile_max, tile_max + kLaneBlock, kMinusInf);
    for (int32_t c = 0; c < nk; ++c) {
      const float* row = s + c * kPanel + j0;
#pragma omp simd
      for (int j = 0; j < kLaneBlock; ++j)
        tile_max[j] = max_of(select(c < visible[j], row[j] * scale, kMinusInf), tile_max[j]);
    }
#pragma omp simd
    for (int j = 0; j < kLaneBlock; ++j) {
      m_new[j] = max_of(tile_max[j], m[j0 + j]);
      // A lane that has seen no key yet keeps m = -inf, where m_old - m_new would be NaN.
      alpha[j0 + j] = select(m_new[j] == kMinusInf, 1.0f, exp_nonpositive(m[j0 + j] - m_new[j]));
      m[j0 + j] = m_new[j];
      sum[j] = 0.0f;
    }
    for (int32_t c = 0; c < nk; ++c) {
      float* row = s + c * kPanel + j0;
#pragma omp simd
      for (int j = 0; j < kLaneBlock; ++j) {
        const float p = select(c < visible[j], exp_nonpositive(row[j] * scale - m_new[j]), 0.0f);
        sum[j] += p;
        row[j] = kRound ? round_as<bf16>(p) : p;
      }
    }
#pragma omp simd
    for (int j = 0; j < kLaneBlock; ++j) l[j0 + j] = l[j0 + j] * alpha[j0 + j] + sum[j];
  }
}

// In place: S^T -> P^T = exp(scale S^T - lse) and dP^T -> dS^T = P^T (dP^T - delta) (rows c < nk,
// lanes j < L), zero where key c is masked. dS takes the unrounded P; kRound rounds both to bf16
// afterwards (f32 tiles of bf16 tensors).
template <bool kRound>
void probability_grads(float* s, float* dp, int32_t nk, int64_t L, const int32_t* n, float scale, const float* lse,
                       const float* delta) {
  for (int64_t j0 = 0; j0 < L; j0 += kLaneBlock) {
    const int32_t* visible = n + j0;
    const float* row_lse = lse + j0;
    const float* row_delta = delta + j0;
    for (int32_t c = 0; c < nk; ++c) {
      float* s_row = s + c * kPanel + j0;
      float* dp_row = dp + c * kPanel + j0;
#pragma omp simd
      for (int j = 0; j < kLaneBlock; ++j) {
        const float p = select(c < visible[j], exp_nonpositive(s_row[j] * scale - row_lse[j]), 0.0f);
        const float ds = p * (dp_row[j] - row_delta[j]);
        s_row[j] = kRound ? round_as<bf16>(p) : p;
        dp_row[j] = kRound ? round_as<bf16>(ds) : ds;
      }
    }
  }
}

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps, which -W(maybe-)uninitialized flags
// wherever they inline (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// exp_nonpositive on 16 lanes: the same reduction x = n ln2 + r and polynomial (elementwise.h, at
// most 1.02 ulp), with 2^n applied by scalef, which leaves out the clamping and exponent arithmetic
// the portable version needs; below kExpLow (-inf included) 0, as there.
[[gnu::always_inline]] inline __m512 exp_nonpositive_16(__m512 x) {
  const __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLow), _CMP_GE_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 poly = _mm512_set1_ps(1.9875691500e-4f);
  for (const float coefficient :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(coefficient));
  const __m512 e_r = _mm512_fmadd_ps(_mm512_mul_ps(poly, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(in_range, e_r, n);
}

// Stores rows c and c + 1 of probabilities (or their gradients) of one 16-lane block: f32 in place
// in the score tile, or for bf16 pairs as the dpbf16 operand with the two rows interleaved,
// pairs[c / 2][j][2] (row stride kPanel pairs).
template <class Elem>
void store_row_pair([[maybe_unused]] float* tile, [[maybe_unused]] Elem* pairs, int32_t c, int64_t j0, __m512 even,
                    __m512 odd) {
  if constexpr (std::is_same_v<Elem, float>) {
    _mm512_storeu_ps(tile + c * kPanel + j0, even);
    _mm512_storeu_ps(tile + (c + 1) * kPanel + j0, odd);
  } else {
#if defined(__AVX512BF16__)
    // cvtne2ps puts odd in the high half; the permutation interleaves the halves element by element.
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                                6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
    _mm512_storeu_si512(pairs + (c * kPanel + 2 * j0), _mm512_permutexvar_epi16(interleave, both));
#endif
  }
}

// Row c of one 16-lane block in bf16: the A operand of dV and dK, whose words pair adjacent lanes.
template <class Elem>
void store_row_bf16([[maybe_unused]] Elem* rows, [[maybe_unused]] int32_t c, [[maybe_unused]] int64_t j0,
                    [[maybe_unused]] __m512 x) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<Elem, bf16>)
    _mm256_storeu_si256((__m256i*)(rows + c * kPanel + j0), (__m256i)_mm512_cvtneps_pbh(x));
#endif
}

// online_softmax (above) for AVX-512, 16 lanes in registers, the probabilities stored by
// store_row_pair (Elem float: in place; bf16: as row pairs into `pairs`, rounded there).
template <class Elem>
void online_softmax_16(float* s, int32_t nk, int64_t L, const int32_t* n, float scale, float* m, float* l, float* alpha,
                       Elem* pairs) {
  const __m512 scale_16 = _mm512_set1_ps(scale), minus_inf = _mm512_set1_ps(kMinusInf);
  for (int64_t j0 = 0; j0 < L; j0 += kLaneBlock) {
    const __m512i visible = _mm512_loadu_si512(n + j0);
    auto visible_mask = [&](int32_t c) { return _mm512_cmpgt_epi32_mask(visible, _mm512_set1_epi32(c)); };
    // Rows past the block's last visible key are all masked: zeros, without an exp.
    const int32_t block_nk = _mm512_reduce_max_epi32(visible);
    __m512 tile_max = minus_inf;
    for (int32_t c = 0; c < block_nk; ++c) {
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + c * kPanel + j0), scale_16);
      tile_max = _mm512_mask_max_ps(tile_max, visible_mask(c), tile_max, x);
    }
    const __m512 m_old = _mm512_loadu_ps(m + j0), m_new = _mm512_max_ps(m_old, tile_max);
    // A lane that has seen no key yet keeps m = -inf, where m_old - m_new would be NaN.
    const __mmask16 unseen = _mm512_cmp_ps_mask(m_new, minus_inf, _CMP_EQ_OQ);
    const __m512 rescale =
        _mm512_mask_blend_ps(unseen, exp_nonpositive_16(_mm512_sub_ps(m_old, m_new)), _mm512_set1_ps(1.0f));
    __m512 sum = _mm512_setzero_ps();
    auto probability = [&](int32_t c) {
      if (c >= block_nk) return _mm512_setzero_ps();
      const __m512 x = _mm512_fmsub_ps(_mm512_loadu_ps(s + c * kPanel + j0), scale_16, m_new);
      const __m512 p = _mm512_maskz_mov_ps(visible_mask(c), exp_nonpositive_16(x));
      sum = _mm512_add_ps(sum, p);
      return p;
    };
    for (int32_t c = 0; c < nk; c += 2) {
      const __m512 even = probability(c);
      store_row_pair(s, pairs, c, j0, even, probability(c + 1));
    }
    _mm512_storeu_ps(m + j0, m_new);
    _mm512_storeu_ps(alpha + j0, rescale);
    _mm512_storeu_ps(l + j0, _mm512_fmadd_ps(_mm512_loadu_ps(l + j0), rescale, sum));
  }
}

// probability_grads (above) for AVX-512: P^T and dS^T of 16 lanes at a time, stored by store_row_pair
// (Elem float: in place; bf16: P^T and dS^T as rows into p_rows and ds_rows, dS^T as row pairs into
// ds_pairs).
template <class Elem>
void probability_grads_16(float* s, float* dp, int32_t nk, int64_t L, const int32_t* n, float scale, const float* lse,
                          const float* delta, Elem* p_rows, Elem* ds_rows, Elem* ds_pairs) {
  const __m512 scale_16 = _mm512_set1_ps(scale);
  for (int64_t j0 = 0; j0 < L; j0 += kLaneBlock) {
    const __m512i visible = _mm512_loadu_si512(n + j0);
    const __m512 row_lse = _mm512_loadu_ps(lse + j0), row_delta = _mm512_loadu_ps(delta + j0);
    // Rows past the block's last visible key are all masked: zeros, without an exp.
    const int32_t block_nk = _mm512_reduce_max_epi32(visible);
    // P^T and dS^T of row c (zero past the tile), the bf16 rows stored on the way.
    auto grads = [&](int32_t c, __m512& p, __m512& ds) {
      p = ds = _mm512_setzero_ps();
      if (c < block_nk) {
        const __m512 x = _mm512_fmsub_ps(_mm512_loadu_ps(s + c * kPanel + j0), scale_16, row_lse);
        p = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(visible, _mm512_set1_epi32(c)), exp_nonpositive_16(x));
        ds = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(dp + c * kPanel + j0), row_delta));
      }
      if (c < nk) {
        store_row_bf16(p_rows, c, j0, p);
        store_row_bf16(ds_rows, c, j0, ds);
      }
    };
    for (int32_t c = 0; c < nk; c += 2) {
      __m512 p_even, ds_even, p_odd, ds_odd;
      grads(c, p_even, ds_even);
      grads(c + 1, p_odd, ds_odd);
      if constexpr (std::is_same_v<Elem, float>) {
        store_row_pair(s, p_rows, c, j0, p_even, p_odd);
        store_row_pair(dp, ds_pairs, c, j0, ds_even, ds_odd);
      } else {
        store_row_pair(dp, ds_pairs, c, j0, ds_even, ds_odd);
      }
    }
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
