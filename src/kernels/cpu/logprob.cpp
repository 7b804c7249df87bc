// Fast softmax cross-entropy with log-prob and entropy outputs (maths in logprob.h), f32 and bf16
// logits. Rows are spread over the OpenMP threads; within a row, the vocabulary loops are plain
// loops that the compiler vectorises, with an exp written for the vectoriser (glibc's vector exp
// is only offered under -ffast-math, which we do not use).
// Not here: the vocab-parallel case (vocab_start != 0); see ref/logprob.cpp.
// Legend: N tokens, V vocab (columns held here).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Partial sums over this many columns stay in f32 (vector lanes), then go into an f64 total, so
// the rounding error of a 150k-column row stays at the f32 level of one short sum.
constexpr int64_t kSumChunk = 512;
// Below this many logits the threads cost more than they save.
constexpr int64_t kParallelMin = 1 << 15;

inline float to_float(float x) { return x; }
inline float to_float(bf16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

inline void store(float& dst, float x) { dst = x; }
// Same rounding as rf::to_bf16 (nearest even, NaN stays NaN), written without a branch so that the
// store loop vectorises.
inline void store(bf16& dst, float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  dst.bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// (c ? a : b) on the bit patterns. A float ?: (or std::max) stays a branch on AVX2 and SSE2:
// under -ftrapping-math GCC will not if-convert a float comparison, so the loop would not vectorise.
inline float select(bool c, float a, float b) {
  const uint32_t mask = -uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// exp(x) for the x <= 0 this file needs (x - max, or z - lse; a rounding-level x > 0 counts as 0),
// within ~2 ulp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, Cephes' degree-7 polynomial for
// e^r, and 2^n from the exponent bits. Below kExpLow (e^x < 1e-37, nothing next to the row's
// largest term) it returns 0, which also keeps 2^n a normal number. NaN stays NaN.
constexpr float kExpLow = -86.0f;
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool below = x < kExpLow;
  const float xc = select(x > 0.0f, 0.0f, select(below, kExpLow, x));
  const float shifted = xc * kLog2e + kRound;
  const float n = shifted - kRound;
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

// A [N, V] view with a contiguous inner dim: row n starts at data + n * row_stride.
template <class T>
struct Rows {
  T* data;
  int64_t row_stride;
};

// Per-token f32 vector (logp, lse, ... are f32 for f32 and bf16 logits) with its stride.
struct Tokens {
  float* data = nullptr;
  int64_t stride = 0;
  float& operator[](int64_t n) const { return data[n * stride]; }
};

Tokens tokens(TensorView t_N) { return t_N.empty() ? Tokens{} : Tokens{t_N.data<float>(), t_N.stride(0)}; }

// Target ids (i32 or i64) with their stride.
struct Targets {
  const int32_t* i32 = nullptr;
  const int64_t* i64 = nullptr;
  int64_t stride = 0;
  int64_t operator[](int64_t n) const { return i32 ? int64_t(i32[n * stride]) : i64[n * stride]; }
};

// Checks the ids up front, so that the error is thrown outside the parallel region.
Targets checked_targets(TensorView targets_N, int64_t V) {
  const bool is_i32 = targets_N.dtype() == DType::i32;
  const Targets targets{is_i32 ? targets_N.data<int32_t>() : nullptr, is_i32 ? nullptr : targets_N.data<int64_t>(),
                        targets_N.stride(0)};
  for (int64_t n = 0; n < targets_N.size(0); ++n)
    RF_CHECK(targets[n] < V, "logprob: target id {} outside the vocabulary of {}", targets[n], V);
  return targets;
}

void check_common(const LogprobParams& params, TensorView logits_NV, TensorView targets_N) {
  RF_CHECK(params.temperature > 0, "logprob: temperature must be > 0, got {}", params.temperature);
  RF_CHECK(params.vocab_start == 0,
           "logprob: vocab_start {} (a vocab-parallel shard) is not supported by the kernel; the "
           "cross-rank max/sum-exp reduction is done by the dist layer",
           params.vocab_start);
  RF_CHECK(logits_NV.rank() == 2 && logits_NV.inner_contiguous() && logits_NV.size(1) > 0,
           "logits_NV: expected a non-empty [N, V] view with a contiguous inner dim, got {}",
           logits_NV.describe());
  RF_CHECK(logits_NV.dtype() == DType::f32 || logits_NV.dtype() == DType::bf16,
           "logits_NV: the cpu kernels take f32 or bf16, got {}", dtype_name(logits_NV.dtype()));
  check_shape(targets_N, Shape{logits_NV.size(0)}, "targets_N");
  RF_CHECK(targets_N.dtype() == DType::i32 || targets_N.dtype() == DType::i64,
           "targets_N: expected i32 or i64, got {}", dtype_name(targets_N.dtype()));
}

void check_per_token(TensorView t_N, int64_t N, const char* what) {
  check_shape(t_N, Shape{N}, what);
  check_dtype(t_N, DType::f32, what);
}

template <class T>
void forward_rows(double temperature, Rows<const T> logits, int64_t N, int64_t V, Targets targets,
                  Tokens logp, Tokens entropy, Tokens lse) {
  const float inv_t = float(1.0 / temperature);
#pragma omp parallel for schedule(static) if (N * V >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits.data + n * logits.row_stride;
    float x_max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : x_max)
    for (int64_t v = 0; v < V; ++v) x_max = std::max(x_max, to_float(x[v]));

    // With d = z - max z (x - x_max is exact for the x near x_max that carry the probability):
    // lse = max z + log sum e^d, and sum p z = max z + sum e^d d / sum e^d, so
    // entropy = log sum e^d - sum e^d d / sum e^d, free of the large max z.
    double sum_exp = 0, sum_exp_d = 0;
    for (int64_t v0 = 0; v0 < V; v0 += kSumChunk) {
      const int64_t v1 = std::min(V, v0 + kSumChunk);
      float chunk_exp = 0, chunk_exp_d = 0;
#pragma omp simd reduction(+ : chunk_exp, chunk_exp_d)
      for (int64_t v = v0; v < v1; ++v) {
        const float d = (to_float(x[v]) - x_max) * inv_t;
        const float e = exp_nonpositive(d);
        chunk_exp += e;
        chunk_exp_d += e * d;
      }
      sum_exp += chunk_exp;
      sum_exp_d += chunk_exp_d;
    }
    const double log_sum = std::log(sum_exp);
    const int64_t t = targets[n];
    logp[n] = t < 0 ? 0.0f : float((double(to_float(x[t])) - x_max) / temperature - log_sum);
    lse[n] = float(double(x_max) / temperature + log_sum);
    if (entropy.data) entropy[n] = float(log_sum - sum_exp_d / sum_exp);
  }
}

template <class T>
void backward_rows(double temperature, Rows<const T> logits, int64_t N, int64_t V, Targets targets,
                   Tokens lse_N, Tokens entropy_N, Tokens dlogp_N, Tokens dentropy_N, Rows<T> dlogits) {
  const float inv_t = float(1.0 / temperature);
#pragma omp parallel for schedule(static) if (N * V >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits.data + n * logits.row_stride;
    T* dx = dlogits.data + n * dlogits.row_stride;
    const int64_t t = targets[n];
    const double lse = lse_N[n];
    const double dlogp = t < 0 ? 0.0 : double(dlogp_N[n]);
    const double entropy = dentropy_N.data ? double(entropy_N[n]) : 0.0;
    const double dentropy = dentropy_N.data ? double(dentropy_N[n]) : 0.0;
    // d = z - lse as (x - a) / T - b, with a = lse T rounded to f32 and b the small remainder:
    // x - a is exact for the x that carry probability, so d keeps f32 precision even when z and
    // lse are large (x / T - lse in f32 would lose ~1e-5 absolute at |z| ~ 100).
    const float a = float(lse * temperature);
    const float b = float(lse - double(a) / temperature);
    // dlogits = dz / T = -p (dlogp + dentropy (d + entropy)) / T  (+ dlogp / T at the target).
    const float alpha = float((dlogp + dentropy * entropy) / temperature);
    const float beta = float(dentropy / temperature);
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) {
      const float d = (to_float(x[v]) - a) * inv_t - b;
      store(dx[v], -exp_nonpositive(d) * (alpha + beta * d));
    }
    if (t >= 0) {  // the target column again, in f64, with its 1[v = target] term
      const double d = double(to_float(x[t])) / temperature - lse;
      const double p = std::exp(d);
      store(dx[t], float((dlogp * (1.0 - p) - dentropy * p * (d + entropy)) / temperature));
    }
  }
}

}  // namespace

void logprob_forward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView logp_N,
                     TensorView entropy_N, TensorView lse_N) {
  check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0), V = logits_NV.size(1);
  check_per_token(logp_N, N, "logp_N");
  check_per_token(lse_N, N, "lse_N");
  if (!entropy_N.empty()) check_per_token(entropy_N, N, "entropy_N");
  const Targets targets = checked_targets(targets_N, V);

  if (logits_NV.dtype() == DType::f32)
    forward_rows<float>(params.temperature, {logits_NV.data<float>(), logits_NV.stride(0)}, N, V, targets,
                        tokens(logp_N), tokens(entropy_N), tokens(lse_N));
  else
    forward_rows<bf16>(params.temperature, {logits_NV.data<bf16>(), logits_NV.stride(0)}, N, V, targets,
                       tokens(logp_N), tokens(entropy_N), tokens(lse_N));
}

void logprob_backward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView lse_N,
                      TensorView entropy_N, TensorView dlogp_N, TensorView dentropy_N, TensorView dlogits_NV) {
  check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0), V = logits_NV.size(1);
  check_per_token(lse_N, N, "lse_N");
  check_per_token(dlogp_N, N, "dlogp_N");
  const bool with_entropy = !dentropy_N.empty();
  if (with_entropy) {
    check_per_token(entropy_N, N, "entropy_N");
    check_per_token(dentropy_N, N, "dentropy_N");
  }
  check_shape(dlogits_NV, logits_NV.shape(), "dlogits_NV");
  check_dtype(dlogits_NV, logits_NV.dtype(), "dlogits_NV");
  RF_CHECK(dlogits_NV.inner_contiguous(), "dlogits_NV: expected a contiguous inner dim, got {}",
           dlogits_NV.describe());
  const Targets targets = checked_targets(targets_N, V);
  const Tokens entropy = with_entropy ? tokens(entropy_N) : Tokens{};
  const Tokens dentropy = with_entropy ? tokens(dentropy_N) : Tokens{};

  if (logits_NV.dtype() == DType::f32)
    backward_rows<float>(params.temperature, {logits_NV.data<float>(), logits_NV.stride(0)}, N, V, targets,
                         tokens(lse_N), entropy, tokens(dlogp_N), dentropy,
                         {dlogits_NV.data<float>(), dlogits_NV.stride(0)});
  else
    backward_rows<bf16>(params.temperature, {logits_NV.data<bf16>(), logits_NV.stride(0)}, N, V, targets,
                        tokens(lse_N), entropy, tokens(dlogp_N), dentropy,
                        {dlogits_NV.data<bf16>(), dlogits_NV.stride(0)});
}

}  // namespace rf::kernels::RF_CPU_NS
