// The tiles of the cpu attention kernel (attention.cpp): how a task walks the rows it owns, how it
// packs query, key and value rows into the layouts the GEMMs of attention_gemm.h read (plain rows,
// rows interleaved in pairs for dpbf16, or rows transposed onto the vector lanes), and the per-call
// scratch the tiles live in. Included by attention.cpp only; like every cpu kernel helper it sits in
// an unnamed namespace inside the variant namespace (see cpu_kernels.h).
// Not here: any arithmetic on scores (attention_softmax.h) or the task structure (attention.cpp).
// Legend: B batch, T sequence, H query heads, K kv heads, D head dim, G = H/K heads per kv head;
// Dp = D padded to kLaneBlock; P elements per GEMM word (1 for f32, 2 for bf16 pairs); a task's
// "row" r is one (query or key, head) it works on.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#include "core/tensor_view.h"
#include "kernels/cpu/attention_gemm.h"
#include "kernels/cpu/elementwise.h"

#ifndef RF_CPU_NS
#error "attention_tiles.h is for the cpu kernels, compiled with RF_CPU_NS set"
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kKeyBlock = 64;  // keys per tile; tiles start at multiples of it (or a document start)
constexpr int64_t kPanel = 64;     // query rows (lanes) per score tile: S^T is kKeyBlock x kPanel f32, 16 KB

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Row (i0, i1, i2) of a rank-4 view whose inner dim is contiguous.
template <class E>
struct Rows {
  explicit Rows(const TensorView& x) : base(x.data<E>()), s0(x.stride(0)), s1(x.stride(1)), s2(x.stride(2)) {}
  Rows(E* base, int64_t s0, int64_t s1, int64_t s2) : base(base), s0(s0), s1(s1), s2(s2) {}
  E* operator()(int64_t i0, int64_t i1, int64_t i2) const { return base + i0 * s0 + i1 * s1 + i2 * s2; }
  E* base;
  int64_t s0, s1, s2;
};

// The lse_BHT view (f32, any strides).
struct LseRows {
  explicit LseRows(const TensorView& x) : base(x.data<float>()), s0(x.stride(0)), s1(x.stride(1)), s2(x.stride(2)) {}
  float& operator()(int64_t b, int64_t h, int64_t t) const { return base[b * s0 + h * s1 + t * s2]; }
  float* base;
  int64_t s0, s1, s2;
};

// Calls fn(r, t, h) for rows r in [r0, r1) of a task whose row r is token t0 + r / G of head
// h0 + r % G, in order, counting rather than dividing (a division per row costs more than copying it).
template <class Fn>
void for_each_row(int64_t t0, int64_t h0, int64_t G, int64_t r0, int64_t r1, const Fn& fn) {
  int64_t t = t0 + r0 / G, g = r0 % G;
  for (int64_t r = r0; r < r1; ++r) {
    fn(r, t, h0 + g);
    if (++g == G) {
      g = 0;
      ++t;
    }
  }
}

// The rows of one tensor a task reads or writes: row r is token t0 + r / G of head h0 + r % G of
// batch row b (G = 1 for keys and values).
template <class E>
struct GroupRows {
  template <class Fn>
  void for_each(int64_t r0, int64_t r1, const Fn& fn) const {
    for_each_row(t0, h0, G, r0, r1, [&](int64_t r, int64_t t, int64_t h) { fn(r, static_cast<const E*>(x(b, t, h))); });
  }

  Rows<E> x;
  int64_t b, t0, h0, G;
};

// Asks for rows [r0, r1) (D elements each) ahead of their use: a task reads rows scattered over the
// tensor (one head of each token), which the hardware prefetchers do not follow, and would otherwise
// wait on memory for each of them.
template <_mm_hint kHint, class E>
void prefetch_rows(const GroupRows<E>& rows_of, int64_t r0, int64_t r1, int64_t D) {
  rows_of.for_each(r0, r1, [&](int64_t, const E* src) {
    for (int64_t byte = 0; byte < D * int64_t(sizeof(E)); byte += 64)
      _mm_prefetch(reinterpret_cast<const char*>(src) + byte, kHint);
  });
}

// For a walk over rows [0, n): at row r, every kLaneBlock rows, asks for the block kPrefetchRows
// ahead (and at r = 0 for the first ones), so rows arrive before they are read.
constexpr int64_t kPrefetchRows = 32;
template <class E>
void prefetch_ahead(const GroupRows<E>& rows_of, int64_t r, int64_t n, int64_t D) {
  if (r == 0) prefetch_rows<_MM_HINT_T0>(rows_of, 0, std::min(n, kPrefetchRows), D);
  if (r % kLaneBlock == 0)
    prefetch_rows<_MM_HINT_T0>(rows_of, std::min(n, r + kPrefetchRows), std::min(n, r + kPrefetchRows + kLaneBlock), D);
}

// A tile element from a tensor element: bf16 stays bf16 in bf16 tiles and widens in f32 tiles.
template <class Elem, class E>
Elem to_tile(E x) {
  if constexpr (std::is_same_v<Elem, E>)
    return x;
  else
    return load(x);
}

// Row src (D elements; null: zeros) as one tile row of Dp elements, zero-padded.
template <class Elem, class E>
void copy_row(const E* src, int64_t D, int64_t Dp, Elem* out) {
  const int64_t n = src ? D : 0;
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) out[d] = to_tile<Elem>(src[d]);
  std::fill(out + n, out + Dp, Elem{});
}

// Rows even and odd (D elements; null: zeros) interleaved element by element into 2 Dp elements:
// the pairs dpbf16 reduces over, for a B operand whose reduction runs over rows. (Only bf16-pair
// builds interleave.)
template <class Elem>
void interleave_rows([[maybe_unused]] const Elem* even, [[maybe_unused]] const Elem* odd, [[maybe_unused]] int64_t D,
                     [[maybe_unused]] int64_t Dp, [[maybe_unused]] Elem* out) {
  static_assert(std::is_same_v<Elem, bf16>, "rows are interleaved for dpbf16 only");
#if defined(__AVX512BF16__)
  // Element i of the even row to output 2i, of the odd row (index 32 + i of the pair) to 2i + 1.
  const __m512i interleave = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                              6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  for (int64_t d = 0; d < Dp; d += kLaneBlock) {
    const __mmask32 valid = __mmask32((uint64_t(1) << std::clamp<int64_t>(D - d, 0, kLaneBlock)) - 1);
    auto load_16 = [&](const Elem* row) {
      return row ? _mm512_maskz_loadu_epi16(valid, row + d) : _mm512_setzero_si512();
    };
    _mm512_storeu_si512(out + 2 * d, _mm512_permutex2var_epi16(load_16(even), interleave, load_16(odd)));
  }
#endif
}

// Rows r < n into `rows` rows (n <= rows, a multiple of P) of Dp elements, P rows interleaved:
// element d of row r at ((r / P) Dp + d) P + r % P. P = 1 gives plain rows; P = 2 the pairs
// dpbf16 reduces over. Padding is zero.
template <int64_t P, class Elem, class E>
void pack_row_groups(const GroupRows<E>& rows_of, int64_t n, int64_t rows, int64_t D, int64_t Dp, Elem* dst) {
  if constexpr (P == 1) {
    rows_of.for_each(0, n, [&](int64_t r, const E* src) { copy_row(src, D, Dp, dst + r * Dp); });
  } else {
    const E* even = nullptr;
    rows_of.for_each(0, n, [&](int64_t r, const E* src) {
      if (r % 2 == 0)
        even = src;
      else
        interleave_rows(even, src, D, Dp, dst + (r - 1) * Dp);
    });
    if (n % 2 == 1) interleave_rows(even, static_cast<const E*>(nullptr), D, Dp, dst + (n - 1) * Dp);
  }
  std::fill(dst + round_up(n, P) * Dp, dst + rows * Dp, Elem{});
}

// How a GEMM reads a key tile: as A, one row of words along the head dim per key (S^T = K Q^T,
// dP^T = V dO^T), or as B, the head dim on the lanes and the reduction over keys (P V, dS K).
enum class KeyOperand : uint8_t { a_rows, b_rows };

// A tile's nk key (or value) rows (G = 1), packed into `tile` as `use` needs them: rows of Dp, or
// for B rows interleaved in pairs (bf16 pairs). A copy, not the tensor read in place: the tile is
// contiguous, where a kv head's rows lie a whole token apart and crowd a few L1 sets.
template <int64_t P, class Elem, class E>
void pack_key_tile(const GroupRows<E>& rows, int64_t nk, int64_t D, int64_t Dp, KeyOperand use, Elem* tile) {
  if (use == KeyOperand::a_rows)
    pack_row_groups<1>(rows, nk, nk, D, Dp, tile);
  else
    pack_row_groups<P>(rows, nk, round_up(nk, P), D, Dp, tile);
}

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps, which -W(maybe-)uninitialized flags
// wherever they inline (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// In-register transpose of a 16 x 16 block of 32-bit elements: x[i] row i in, column i out.
// Interleave pairs of rows, then quads within 128-bit lanes, then swap 128-bit lanes twice.
void transpose_16x16(__m512 x[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(x[i], x[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(x[i], x[i + 1]);
  }
  // x[4g + k]: rows 4g..4g+3 at column 4L + k of each 128-bit lane L.
  for (int g = 0; g < 16; g += 4) {
    x[g] = _mm512_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    x[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    x[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    x[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(x[k], x[4 + k], 0x88);      // 128-bit lanes 0, 2 of rows 0-3 and 4-7
    t[4 + k] = _mm512_shuffle_f32x4(x[k], x[4 + k], 0xdd);  // lanes 1, 3
    t[8 + k] = _mm512_shuffle_f32x4(x[8 + k], x[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(x[8 + k], x[12 + k], 0xdd);
  }
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    x[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    x[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
    x[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
  }
}

// 16 rows (null: zeros) of D elements, read as `words` 32-bit words (the last one zero-filled past
// the row), onto 16 lanes: word w of row i to word w * ld + i of dst.
template <class E>
void transpose_rows_16(const E* const rows[16], int64_t D, int64_t words, int64_t ld, E* dst) {
  const int64_t row_bytes = D * int64_t(sizeof(E));
  for (int64_t w0 = 0; w0 < words; w0 += 16) {
    const int64_t valid = std::min<int64_t>(64, row_bytes - w0 * 4);
    const __mmask64 mask = valid == 64 ? ~__mmask64(0) : (__mmask64(1) << valid) - 1;
    __m512 x[16];
    for (int i = 0; i < 16; ++i)
      x[i] = rows[i]
                 ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi8(mask, reinterpret_cast<const char*>(rows[i]) + w0 * 4))
                 : _mm512_setzero_ps();
    transpose_16x16(x);
    for (int64_t k = 0; k < std::min<int64_t>(16, words - w0); ++k)
      _mm512_storeu_ps(reinterpret_cast<float*>(dst) + (w0 + k) * ld, x[k]);
  }
}
#pragma GCC diagnostic pop
#endif

// Rows r < n of D elements onto the lanes of a tile with `lanes` lanes (n <= lanes, a multiple of
// kLaneBlock): element d of row r at ((d / P) lanes + r) P + d % P, a word's P elements adjacent.
// Dims up to round_up(D, P) are written, the padding lanes zero. Sixteen rows at a time, so each
// dim's store is one 64-byte run (lanes apart, the dims of one row would share a few cache sets).
template <int64_t P, class Elem, class E>
void pack_transposed(const GroupRows<E>& rows_of, int64_t n, int64_t lanes, int64_t D, Elem* dst) {
  const int64_t words = round_up(D, P) / P;
  for (int64_t r0 = 0; r0 < lanes; r0 += kLaneBlock) {
    const E* rows[kLaneBlock] = {};
    rows_of.for_each(r0, std::min(n, r0 + kLaneBlock), [&](int64_t r, const E* src) { rows[r - r0] = src; });
    prefetch_rows<_MM_HINT_T0>(rows_of, std::min(n, r0 + kLaneBlock), std::min(n, r0 + 2 * kLaneBlock), D);
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<Elem, E>) {
      transpose_rows_16(rows, D, words, lanes, dst + r0 * P);
      continue;
    }
#endif
    for (int64_t w = 0; w < words; ++w) {
      Elem* out = dst + (w * lanes + r0) * P;
      for (int64_t i = 0; i < kLaneBlock; ++i)
        for (int64_t k = 0; k < P; ++k) {
          const int64_t d = w * P + k;
          out[i * P + k] = rows[i] != nullptr && d < D ? to_tile<Elem>(rows[i][d]) : Elem{};
        }
    }
  }
}

// Per-thread scratch: one 64-byte aligned block per thread and call, carved into a task's tiles
// (no allocation per tile, and no tile starts mid cache line).
struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

AlignedBytes allocate_aligned(size_t bytes) {
  return AlignedBytes(static_cast<std::byte*>(::operator new[](std::max<size_t>(bytes, 64), std::align_val_t(64))));
}

// Hands out consecutive 64-byte aligned spans of `base`; with no base it only measures.
class Arena {
 public:
  explicit Arena(std::byte* base = nullptr) : base_(base) {}
  template <class T>
  T* take(int64_t count) {
    const size_t at = offset_;
    offset_ = size_t(round_up(int64_t(offset_ + size_t(count) * sizeof(T)), 64));
    return base_ ? reinterpret_cast<T*>(base_ + at) : nullptr;
  }
  size_t size() const { return offset_; }

 private:
  std::byte* base_;
  size_t offset_ = 0;
};

// Tiles carved by `carve(arena)` from one aligned allocation into `storage`, sized by a measuring pass.
template <class Tiles, class Carve>
Tiles carve_tiles(const Carve& carve, AlignedBytes& storage) {
  Arena measure;
  carve(measure);
  storage = allocate_aligned(measure.size());
  Arena arena(storage.get());
  return carve(arena);
}

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
