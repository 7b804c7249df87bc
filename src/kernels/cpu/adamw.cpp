// Fast AdamW step over f32 master weights: the same operations as ref/adamw.cpp (torch's op
// order, each op rounded to f32, the two FMAs explicit), in one vectorised, multi-threaded sweep
// over memory instead of one per tensor op. Bitwise equal to the ref kernel.
// Not here: bf16 master weights (masters are f32; the bf16 model copy is `param_copy`).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Below this many elements the threads cost more than they save.
constexpr int64_t kParallelMin = 1 << 15;
constexpr int64_t kTile = 512;

// Same rounding as rf::to_bf16 (nearest even, NaN stays NaN), branch-free so the loop vectorises.
inline uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// Correctly rounded square roots of x[0, n), vectorised by hand: the compiler keeps std::sqrt
// scalar in loops (it may have to set errno, and we do not build with -fno-math-errno). Every
// form is IEEE sqrt, so the result equals ref's std::sqrt bit for bit.
void sqrt_elements(const float* x, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)  // also the AVX-512 build: 8 lanes of sqrt are far from the bottleneck
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#endif
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  for (; i < n; ++i) out[i] = std::sqrt(x[i]);
}

// Copy is void (no copy), float or bf16: the dtype of param_copy. The elements go in tiles small
// enough for L1, so the three passes over a tile (moments, square roots, parameters) cost one
// trip to memory.
template <class Copy>
void step_elements(const AdamWParams& params, float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                   int64_t count, Copy* copy) {
  const double bias_correction1 = 1 - std::pow(params.beta1, double(params.step));
  const double bias_correction2 = 1 - std::pow(params.beta2, double(params.step));
  const double step_size = params.lr / bias_correction1;
  const float decay = float(1 - params.lr * params.weight_decay);
  const float beta1 = float(params.beta1), one_minus_beta1 = float(1 - params.beta1);
  const float beta2 = float(params.beta2), one_minus_beta2 = float(1 - params.beta2);
  const float denom_scale = float(std::sqrt(bias_correction2)), eps = float(params.eps);
  const float neg_step_size = float(-step_size);
  const int64_t num_tiles = (count + kTile - 1) / kTile;

#pragma omp parallel for schedule(static) if (count >= kParallelMin)
  for (int64_t tile = 0; tile < num_tiles; ++tile) {
    const int64_t begin = tile * kTile, n = std::min(kTile, count - begin);
    float* p = param + begin;
    float* m = exp_avg + begin;
    float* v = exp_avg_sq + begin;
    const float* g = grad + begin;
    // param.mul_ is an op of its own (rounded before the final add); doing it in this pass, through
    // memory, also keeps the compiler from contracting it with that add into an FMA.
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      p[i] = p[i] * decay;
      m[i] = std::fma(g[i], one_minus_beta1, m[i] * beta1);
      v[i] = std::fma(one_minus_beta2 * g[i], g[i], v[i] * beta2);
    }
    float root_v[kTile];
    sqrt_elements(v, root_v, n);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float denom = root_v[i] / denom_scale + eps;
      const float updated = p[i] + neg_step_size * m[i] / denom;
      p[i] = updated;
      if constexpr (std::is_same_v<Copy, float>) copy[begin + i] = updated;
      if constexpr (std::is_same_v<Copy, bf16>) copy[begin + i].bits = bf16_bits(updated);
    }
  }
}

}  // namespace

void adamw_step(const AdamWParams& params, TensorView param, TensorView grad, TensorView exp_avg,
                TensorView exp_avg_sq, TensorView param_copy) {
  RF_CHECK(param.dtype() == DType::f32, "adamw: the cpu kernel takes f32 master weights, got {}",
           dtype_name(param.dtype()));
  RF_CHECK(params.step >= 1, "adamw: step is 1-based, got {}", params.step);
  const int64_t count = param.numel();
  for (const auto& [view, what] : {std::pair{param, "param"}, std::pair{grad, "grad"},
                                   std::pair{exp_avg, "exp_avg"}, std::pair{exp_avg_sq, "exp_avg_sq"}}) {
    check_dtype(view, DType::f32, what);
    RF_CHECK(view.is_contiguous() && view.numel() == count, "adamw: {} must be contiguous with {} elements, got {}",
             what, count, view.describe());
  }
  float* p = param.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const float* g = grad.data<float>();
  if (param_copy.empty()) {
    step_elements<void>(params, p, g, m, v, count, nullptr);
    return;
  }
  RF_CHECK((param_copy.dtype() == DType::f32 || param_copy.dtype() == DType::bf16) && param_copy.is_contiguous() &&
               param_copy.numel() == count,
           "adamw: param_copy must be a contiguous f32 or bf16 tensor of {} elements, got {}", count,
           param_copy.describe());
  if (param_copy.dtype() == DType::f32)
    step_elements(params, p, g, m, v, count, param_copy.data<float>());
  else
    step_elements(params, p, g, m, v, count, param_copy.data<bf16>());
}

}  // namespace rf::kernels::RF_CPU_NS
