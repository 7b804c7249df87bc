// Fast RoPE for f32 and bf16 (maths in kernels/rope.h), in place. Tokens are spread over threads.
// For each token the cosines and sines are computed once, in f64 from the f64 angle, rounded to
// f32 and applied to all H heads in f32. Caching a table per call would not save work: positions
// rarely repeat within a call (q and k are separate calls), so the H heads sharing a token are the
// only reuse there is, and that is taken here without any scratch beyond the stack.
// Legend: N tokens, H heads, D head dim.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Frequencies handled per pass over the heads: the stack holds this many cosines and sines.
constexpr int64_t kFreqChunk = 64;

// Rotates the first rotary_dim dims of every head by +angle (sign 1) or -angle (sign -1).
template <class T, class Pos>
void rotate_tokens(const Pos* pos, int64_t pos_stride, TensorView x_NHD, int64_t rotary_dim,
                   const std::vector<double>& inv_freq, double sign) {
  const int64_t N = x_NHD.size(0), H = x_NHD.size(1);
  const int64_t half = rotary_dim / 2;
  T* x = x_NHD.data<T>();
  const int64_t token_stride = x_NHD.stride(0), head_stride = x_NHD.stride(1);
#pragma omp parallel for schedule(static) if (N * H * rotary_dim >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const double position = double(pos[n * pos_stride]);
    for (int64_t i0 = 0; i0 < half; i0 += kFreqChunk) {
      const int64_t len = std::min(kFreqChunk, half - i0);
      float cos_a[kFreqChunk], sin_a[kFreqChunk];
      for (int64_t j = 0; j < len; ++j) {
        const double angle = position * inv_freq[size_t(i0 + j)];
        cos_a[j] = float(std::cos(angle));
        sin_a[j] = float(sign * std::sin(angle));
      }
      for (int64_t h = 0; h < H; ++h) {
        T* x1 = x + n * token_stride + h * head_stride + i0;
        T* x2 = x1 + half;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) {
          const float a = load(x1[j]), b = load(x2[j]);
          store(x1[j], a * cos_a[j] - b * sin_a[j]);
          store(x2[j], b * cos_a[j] + a * sin_a[j]);
        }
      }
    }
  }
}

template <class T>
void rotate(const RopeParams& p, TensorView pos_N, TensorView x_NHD, int64_t rotary_dim, double sign) {
  // rotary_dim/2 doubles per call, so that no thread recomputes pow() per token.
  std::vector<double> inv_freq(size_t(rotary_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(p.theta, -2.0 * double(i) / double(rotary_dim));
  if (pos_N.dtype() == DType::i32)
    rotate_tokens<T>(pos_N.data<int32_t>(), pos_N.stride(0), x_NHD, rotary_dim, inv_freq, sign);
  else
    rotate_tokens<T>(pos_N.data<int64_t>(), pos_N.stride(0), x_NHD, rotary_dim, inv_freq, sign);
}

void rotate_any(const RopeParams& p, TensorView pos_N, TensorView x_NHD, double sign) {
  const int64_t rotary_dim = check_rope(p, pos_N, x_NHD);
  switch (x_NHD.dtype()) {
    case DType::f32: return rotate<float>(p, pos_N, x_NHD, rotary_dim, sign);
    case DType::bf16: return rotate<bf16>(p, pos_N, x_NHD, rotary_dim, sign);
    default: RF_CHECK(false, "cpu rope: {} runs on ref", dtype_name(x_NHD.dtype()));
  }
}

}  // namespace

void rope_forward(const RopeParams& p, TensorView pos_N, TensorView x_NHD) { rotate_any(p, pos_N, x_NHD, 1.0); }

void rope_backward(const RopeParams& p, TensorView pos_N, TensorView dx_NHD) { rotate_any(p, pos_N, dx_NHD, -1.0); }

}  // namespace rf::kernels::RF_CPU_NS
