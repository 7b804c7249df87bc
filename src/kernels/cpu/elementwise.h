// Helpers of the cpu element- and row-wise kernels (RMSNorm, RoPE, SwiGLU, embedding): f32 <-> bf16
// conversions as branch-free integer arithmetic the compiler vectorises at every instruction set
// (`load` and `store` are overloaded on the storage type, so one kernel template serves f32 and
// bf16 tensors and always computes in f32), and the size below which a kernel stays on one thread.
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

}  // namespace
}  // namespace rf::kernels::RF_CPU_NS
