// Fast RoPE for f32 and bf16 (maths in kernels/rope.h), in place. Tokens are spread over threads.
// The cosines and sines of a position are computed in f64 from the f64 angle, rounded to f32 and
// applied to all H heads in f32. When the call's positions span at most N values (always for
// packed rows, which restart positions at every document: B rows of T tokens need T entries, not
// B*T), they are tabulated once per call in a per-thread buffer that only grows; otherwise (a few
// tokens at scattered positions, as in decoding) each token computes its own on the stack. Both
// give the same bits.
// Legend: N tokens, H heads, D head dim, P tabulated positions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Frequencies handled per pass over the heads when a token computes its own angles: the stack
// holds this many cosines and sines.
constexpr int64_t kFreqChunk = 64;

// cos(position * inv_freq[j]) and sign * sin(...) for j < len, into cos_a and sin_a.
void angles(double position, const double* inv_freq, int64_t len, double sign, float* cos_a, float* sin_a) {
  for (int64_t j = 0; j < len; ++j) {
    const double angle = position * inv_freq[j];
    cos_a[j] = float(std::cos(angle));
    sin_a[j] = float(sign * std::sin(angle));
  }
}

// Rotates len frequencies of every head of one token, starting at frequency i0 of each head.
template <class T>
void rotate_heads(T* token, int64_t H, int64_t head_stride, int64_t half, int64_t i0, int64_t len,
                  const float* cos_a, const float* sin_a) {
  for (int64_t h = 0; h < H; ++h) {
    T* x1 = token + h * head_stride + i0;
    T* x2 = x1 + half;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const float a = load(x1[j]), b = load(x2[j]);
      store(x1[j], a * cos_a[j] - b * sin_a[j]);
      store(x2[j], b * cos_a[j] + a * sin_a[j]);
    }
  }
}

// Positions first..first+P-1 tabulated: row p holds half cosines, then half sines.
struct AngleTable {
  int64_t first = 0, num_positions = 0;
  const float* rows = nullptr;
};

AngleTable tabulate(int64_t first, int64_t num_positions, const std::vector<double>& inv_freq, double sign) {
  thread_local std::vector<float> storage;
  const int64_t half = int64_t(inv_freq.size());
  if (storage.size() < size_t(num_positions * 2 * half)) storage.resize(size_t(num_positions * 2 * half));
  float* rows = storage.data();
#pragma omp parallel for schedule(static) if (num_positions * half >= kMinParallelElements / 8)
  for (int64_t p = 0; p < num_positions; ++p)
    angles(double(first + p), inv_freq.data(), half, sign, rows + p * 2 * half, rows + p * 2 * half + half);
  return {first, num_positions, rows};
}

// Rotates the first rotary_dim dims of every head by +angle (sign 1) or -angle (sign -1).
template <class T, class Pos>
void rotate_tokens(const Pos* pos, int64_t pos_stride, TensorView x_NHD, int64_t rotary_dim,
                   const std::vector<double>& inv_freq, double sign) {
  const int64_t N = x_NHD.size(0), H = x_NHD.size(1);
  const int64_t half = rotary_dim / 2;
  T* x = x_NHD.data<T>();
  const int64_t token_stride = x_NHD.stride(0), head_stride = x_NHD.stride(1);
  int64_t lowest = N > 0 ? int64_t(pos[0]) : 0, highest = lowest;
  for (int64_t n = 1; n < N; ++n) {
    lowest = std::min(lowest, int64_t(pos[n * pos_stride]));
    highest = std::max(highest, int64_t(pos[n * pos_stride]));
  }
  const AngleTable table =
      highest - lowest < N ? tabulate(lowest, highest - lowest + 1, inv_freq, sign) : AngleTable{};
#pragma omp parallel for schedule(static) if (N * H * rotary_dim >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t position = int64_t(pos[n * pos_stride]);
    T* token = x + n * token_stride;
    if (table.rows != nullptr) {
      const float* row = table.rows + (position - table.first) * 2 * half;
      rotate_heads(token, H, head_stride, half, 0, half, row, row + half);
      continue;
    }
    for (int64_t i0 = 0; i0 < half; i0 += kFreqChunk) {
      const int64_t len = std::min(kFreqChunk, half - i0);
      float cos_a[kFreqChunk], sin_a[kFreqChunk];
      angles(double(position), inv_freq.data() + i0, len, sign, cos_a, sin_a);
      rotate_heads(token, H, head_stride, half, i0, len, cos_a, sin_a);
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
