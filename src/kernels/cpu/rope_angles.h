// The cosines and sines a RoPE call needs (maths in kernels/rope.h), shared by the cpu RoPE kernel
// and the attention kernel that rotates q and k while loading them. Each angle is formed in f64 from
// the f64 frequency and rounded to f32 once, so both kernels rotate with the same bits.
// When the call's positions span fewer values than it has tokens (always for packed rows, which
// restart positions at every document: B rows of T tokens need T entries, not B*T) the table holds
// one row per position; otherwise (a few tokens at scattered positions, as in decoding) one row per
// token. Either way no more sincos than tokens x frequencies. The rows live in a per-thread buffer
// that only grows, so a steady-state call does not allocate; a table is valid until the same thread
// builds the next one.
// Legend: N tokens, F = rotary_dim / 2 frequencies.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/tensor_view.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/rope.h"

#ifndef RF_CPU_NS
#error "rope_angles.h is for the cpu kernels, compiled with RF_CPU_NS set"
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

class RopeAngleTable {
 public:
  // sign 1 rotates by +angle (forward), -1 by -angle (backward).
  RopeAngleTable(const RopeParams& p, const TensorView& pos_N, int64_t rotary_dim, double sign)
      : pos32_(pos_N.dtype() == DType::i32 ? pos_N.data<int32_t>() : nullptr),
        pos64_(pos_N.dtype() == DType::i64 ? pos_N.data<int64_t>() : nullptr),
        pos_stride_(pos_N.stride(0)),
        F_(rotary_dim / 2) {
    const int64_t N = pos_N.size(0);
    int64_t lowest = N > 0 ? position(0) : 0, highest = lowest;
    for (int64_t n = 1; n < N; ++n) {
      lowest = std::min(lowest, position(n));
      highest = std::max(highest, position(n));
    }
    by_position_ = highest - lowest < N;
    first_ = lowest;
    const int64_t num_rows = by_position_ ? highest - lowest + 1 : N;
    std::vector<double> inv_freq(static_cast<size_t>(F_));
    for (int64_t i = 0; i < F_; ++i) inv_freq[size_t(i)] = rope_inv_freq(p, i, rotary_dim);
    thread_local std::vector<float> storage;
    if (storage.size() < size_t(num_rows * 2 * F_)) storage.resize(size_t(num_rows * 2 * F_));
    rows_ = storage.data();
#pragma omp parallel for schedule(static) if (num_rows * F_ >= kMinParallelElements / 8)
    for (int64_t r = 0; r < num_rows; ++r) {
      const double at = double(by_position_ ? first_ + r : position(r));
      float* cos_a = rows_ + r * 2 * F_;
      for (int64_t i = 0; i < F_; ++i) {
        const double angle = at * inv_freq[size_t(i)];
        cos_a[i] = float(std::cos(angle));
        cos_a[F_ + i] = float(sign * std::sin(angle));
      }
    }
  }

  // Token n's F cosines, followed by its F (signed) sines.
  const float* row(int64_t n) const { return rows_ + (by_position_ ? position(n) - first_ : n) * 2 * F_; }
  int64_t num_frequencies() const { return F_; }

 private:
  // Token n's position, read without TensorView's per-access dtype check (row() is per head row).
  int64_t position(int64_t n) const { return pos32_ != nullptr ? pos32_[n * pos_stride_] : pos64_[n * pos_stride_]; }

  const int32_t* pos32_;
  const int64_t* pos64_;
  int64_t pos_stride_;
  int64_t F_;
  bool by_position_ = false;
  int64_t first_ = 0;
  float* rows_ = nullptr;
};

// Rotates the first 2F dims of one head (x1 = x[0, F), x2 = x[F, 2F)) by a table row's angles:
// (x1, x2) <- (x1 cos - x2 sin, x2 cos + x1 sin), in f32.
template <class T>
inline void rotate_head(T* x, int64_t F, const float* angles) {
  const float* cos_a = angles;
  const float* sin_a = angles + F;
#pragma omp simd
  for (int64_t i = 0; i < F; ++i) {
    const float a = load(x[i]), b = load(x[F + i]);
    store(x[i], a * cos_a[i] - b * sin_a[i]);
    store(x[F + i], b * cos_a[i] + a * sin_a[i]);
  }
}

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
