// Helpers of the cpu kernels that loop over elements in f32 (RMSNorm, RoPE, SwiGLU, embedding,
// logprob, attention), all written so that the loops using them vectorise at every instruction set:
// f32 <-> bf16 conversions as branch-free integer arithmetic (`load` and `store` are overloaded on
// the storage type, so one kernel template serves f32 and bf16 tensors and always computes in f32),
// a bit-select, an exp for x <= 0 (libm's expf is a scalar call; glibc's vector exp is only offered
// under -ffast-math, which we do not use), and the size below which a kernel stays on one thread.
// In an unnamed namespace inside the variant namespace: every variant keeps its own copy (see
// cpu_kernels.h).
#pragma once

#include <bit>
#include <cstdint>

#include "core/dtype.h"

#ifndef RF_CPU_NS
#error "elementwise.h is for the cpu kernels, compiled with RF_CPU_NS set"
#endif

namespace rf::kernels::RF_CPU_NS {
namespace {

// Below this many elements a kernel runs on the calling thread: waking the OpenMP team costs more
// than the work (a few microseconds, far more when the machine is oversubscribed).
constexpr int64_t kMinParallelElements = int64_t(1) << 14;

inline float load(float x) { return x; }
inline float load(bf16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

inline void store(float& dst, float value) { dst = value; }
// Round to nearest even, NaN stays a quiet NaN: bit-identical to rf::to_bf16, without its branch.
inline void store(bf16& dst, float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  dst.bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// The value a float takes once stored as T (the identity for f32): how a kernel reproduces a
// rounding point of the Hugging Face computation, e.g. bf16 activations between two ops.
template <class T>
inline float round_as(float value) {
  T stored;
  store(stored, value);
  return load(stored);
}

// (c ? a : b) on the bit patterns. A float ?: (or std::min / std::max) stays a branch on AVX2 and
// SSE2: under -ftrapping-math GCC will not if-convert a float comparison, so the loop would not
// vectorise.
inline float select(bool c, float a, float b) {
  const uint32_t mask = -uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^x for x <= 0 (x - max or z - lse in a softmax, -|g| in a sigmoid). Cody-Waite reduction
// x = n ln2 + r with |r| <= ln2/2, Cephes' polynomial for e^r (degree 7), and 2^n built in the
// exponent bits. At most 1.02 ulp from e^x at every float in [-87, 0], with and without FMA
// contraction (checked exhaustively against the f64 exp; tests/kernels/elementwise_test.cpp samples
// it per variant); a Taylor polynomial of the same degree reaches 1.22 ulp without FMA.
// Clamping: x > 0 counts as 0 (returns 1: a caller's x is at most a rounding error above 0), and
// below kExpLow it returns 0 (the true value is under 1.7e-38, nothing next to the row's largest
// term, and 2^n stays a normal number), -inf included. NaN stays NaN.
constexpr float kExpLow = -87.0f;
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool below = x < kExpLow;
  const float xc = select(x > 0.0f, 0.0f, select(below, kExpLow, x));
  const float shifted = xc * kLog2e + kRound;
  const float n = shifted - kRound;
  // From the bits rather than a float-to-int conversion, which is undefined for NaN.
  const int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float poly = 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const float e_r = poly * r * r + r + 1.0f;
  return select(below, 0.0f, e_r * std::bit_cast<float>(uint32_t(n_int + 127) << 23));
}

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
