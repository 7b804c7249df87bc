// The few-row kernels of the grouped GEMM (grouped_few_rows.h): the loops over one tile around the register
// tiles of gemm_register_tiles.h. Only the AVX2 and AVX-512 variants have them.
// Legend: M the tile's rows of one expert, I in-features, O out-features; S a strip of kStrip columns.
#include "kernels/cpu/grouped_few_rows.h"

#if defined(__AVX2__)

#include <algorithm>

#include "kernels/cpu/gemm_register_tiles.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

#if defined(__AVX512F__)
// dot: 24 accumulators + 4 a vectors + 1 b vector of the 32 zmm; broadcast: 24 + 4 b vectors + 1 broadcast.
constexpr int64_t kDotRows = 4, kDotCols = 6, kBcRows = 6, kBcVecs = 4;
#else
// dot: 9 accumulators + 3 a vectors + 1 b vector of the 16 ymm; broadcast: 12 + 2 b vectors + 1 broadcast.
constexpr int64_t kDotRows = 3, kDotCols = 3, kBcRows = 6, kBcVecs = 2;
#endif
constexpr int64_t kStrip = kBcVecs * kLanes;

// dgrad reads w in place, kDepthChunk rows by kColBlock columns at a time (contiguous 1 KiB row pieces in f32,
// which the prefetcher follows, unlike strips of a few cache lines): 64 x 256 f32 stay in L2 while every row
// block of dy passes over them, the partial sums of kFewRows x kColBlock in L1. Only a strip narrower than kStrip
// (the end of a tile) is packed, zero-padded.
constexpr int64_t kDepthChunk = 64, kColBlock = 256;

inline void store_f32(float* p, float v) { *p = v; }
inline void store_f32(bf16* p, float v) { *p = to_bf16(v); }

// out[0, n) (= or +=) acc[0, n), rounded once to T.
template <class T>
void store_row(T* out, const float* acc, int64_t n, Accumulate mode) {
  if (mode == Accumulate::add) {
    for (int64_t j = 0; j < n; ++j) store_f32(out + j, to_f32(out[j]) + acc[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) store_f32(out + j, acc[j]);
  }
}

// packed_KS = src rows [0, K), columns [0, width) in f32, the columns past width zero.
template <class T>
void pack_strip(const T* src, int64_t ld, int64_t K, int64_t width, float* packed) {
  for (int64_t k = 0; k < K; ++k, packed += kStrip) {
    for (int64_t j = 0; j < width; ++j) packed[j] = to_f32(src[k * ld + j]);
    std::fill(packed + width, packed + kStrip, 0.0f);
  }
}

// A block of kDotCols rows of w against every row block of x: w is read from memory once, x from cache.
template <class T>
void forward_tile(const T* x, int64_t ldx, const T* w, int64_t ldw, T* y, int64_t ldy, int64_t M, int64_t O,
                  int64_t I) {
  float out[kDotRows * kDotCols];
  for (int64_t o0 = 0; o0 < O; o0 += kDotCols) {
    const int64_t cols = std::min(kDotCols, O - o0);
    for (int64_t m0 = 0; m0 < M; m0 += kDotRows) {
      const int64_t rows = std::min(kDotRows, M - m0);
      with_rows<kDotRows>(rows, [&](auto R) {
        if (cols == kDotCols) {
          dot_block<R, kDotCols>(x + m0 * ldx, ldx, w + o0 * ldw, ldw, I, out, kDotCols);
        } else {
          for (int64_t c = 0; c < cols; ++c)
            dot_block<R, 1>(x + m0 * ldx, ldx, w + (o0 + c) * ldw, ldw, I, out + c, kDotCols);
        }
      });
      for (int64_t r = 0; r < rows; ++r)
        store_row(y + (m0 + r) * ldy + o0, out + r * kDotCols, cols, Accumulate::overwrite);
    }
  }
}

// Per block of dx columns: w applied kDepthChunk rows at a time to all M rows (partial sums in acc), then dx
// written once.
template <class T>
void dgrad_tile(const T* dy, int64_t ldy, const T* w, int64_t ldw, T* dx, int64_t ldx, int64_t M, int64_t O,
                int64_t I, Accumulate mode) {
  alignas(64) float packed[kDepthChunk * kStrip];
  alignas(64) float acc[kFewRows * kColBlock];
  for (int64_t c0 = 0; c0 < I; c0 += kColBlock) {
    const int64_t block = std::min(kColBlock, I - c0);
    if (O == 0) std::fill(acc, acc + M * kColBlock, 0.0f);
    for (int64_t o0 = 0; o0 < O; o0 += kDepthChunk) {
      const int64_t depth = std::min(kDepthChunk, O - o0);
      for (int64_t s0 = 0; s0 < block; s0 += kStrip) {
        const int64_t width = std::min(kStrip, block - s0);
        const T* strip = w + o0 * ldw + c0 + s0;
        if (width < kStrip) pack_strip(strip, ldw, depth, width, packed);
        for (int64_t m0 = 0; m0 < M; m0 += kBcRows)
          with_rows<kBcRows>(std::min(kBcRows, M - m0), [&](auto R) {
            const T* a = dy + m0 * ldy + o0;
            float* out = acc + m0 * kColBlock + s0;
            if (width == kStrip) {
              broadcast_block<R, kBcVecs>(a, ldy, 1, strip, ldw, depth, out, kColBlock, o0 > 0);
            } else {
              broadcast_block<R, kBcVecs>(a, ldy, 1, packed, kStrip, depth, out, kColBlock, o0 > 0);
            }
          });
      }
    }
    for (int64_t m = 0; m < M; ++m) store_row(dx + m * ldx + c0, acc + m * kColBlock, block, mode);
  }
}

// Per strip of dw columns: x's M rows packed once, then every block of kBcRows dw rows is one register tile
// over the depth M, written straight to dw.
template <class T>
void wgrad_tile(const T* dy, int64_t ldy, const T* x, int64_t ldx, float* dw, int64_t ldw, int64_t M, int64_t O,
                int64_t I, Accumulate mode) {
  alignas(64) float packed[kFewRows * kStrip];
  alignas(64) float acc[kBcRows * kStrip];
  for (int64_t i0 = 0; i0 < I; i0 += kStrip) {
    const int64_t width = std::min(kStrip, I - i0);
    pack_strip(x + i0, ldx, M, width, packed);
    for (int64_t o0 = 0; o0 < O; o0 += kBcRows) {
      const int64_t rows = std::min(kBcRows, O - o0);
      with_rows<kBcRows>(rows, [&](auto R) {
        broadcast_block<R, kBcVecs>(dy + o0, 1, ldy, packed, kStrip, M, acc, kStrip, false);
      });
      for (int64_t r = 0; r < rows; ++r) store_row(dw + (o0 + r) * ldw + i0, acc + r * kStrip, width, mode);
    }
  }
}

// f(T{}) with T the element type of a bf16 or f32 view.
template <class F>
void on_element_type(const TensorView& v, const F& f) {
  if (v.dtype() == DType::bf16) {
    f(bf16{});
  } else {
    RF_CHECK(v.dtype() == DType::f32, "few-row grouped GEMM: f32 or bf16, got {}", dtype_name(v.dtype()));
    f(float{});
  }
}

}  // namespace

void few_rows_forward(TensorView x_MI, TensorView w_OI, TensorView y_MO) {
  RF_CHECK(x_MI.size(0) <= kFewRows, "few_rows_forward: {} rows, at most {}", x_MI.size(0), kFewRows);
  on_element_type(x_MI, [&]<class T>(T) {
    forward_tile(x_MI.data<T>(), x_MI.stride(0), w_OI.data<T>(), w_OI.stride(0), y_MO.data<T>(), y_MO.stride(0),
                 x_MI.size(0), w_OI.size(0), x_MI.size(1));
  });
}

void few_rows_dgrad(TensorView dy_MO, TensorView w_OI, TensorView dx_MI, Accumulate mode) {
  RF_CHECK(dy_MO.size(0) <= kFewRows, "few_rows_dgrad: {} rows, at most {}", dy_MO.size(0), kFewRows);
  on_element_type(dy_MO, [&]<class T>(T) {
    dgrad_tile(dy_MO.data<T>(), dy_MO.stride(0), w_OI.data<T>(), w_OI.stride(0), dx_MI.data<T>(), dx_MI.stride(0),
               dy_MO.size(0), w_OI.size(0), w_OI.size(1), mode);
  });
}

void few_rows_wgrad(TensorView dy_MO, TensorView x_MI, TensorView dw_OI, Accumulate mode) {
  RF_CHECK(dy_MO.size(0) <= kFewRows, "few_rows_wgrad: {} rows, at most {}", dy_MO.size(0), kFewRows);
  on_element_type(dy_MO, [&]<class T>(T) {
    wgrad_tile(dy_MO.data<T>(), dy_MO.stride(0), x_MI.data<T>(), x_MI.stride(0), dw_OI.data<float>(),
               dw_OI.stride(0), dy_MO.size(0), dw_OI.size(0), dw_OI.size(1), mode);
  });
}

}  // namespace rf::kernels::RF_CPU_NS

#endif  // __AVX2__
