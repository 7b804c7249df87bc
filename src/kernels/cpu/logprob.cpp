// Fast softmax cross-entropy with log-prob and entropy outputs (maths in logprob.h), f32 and bf16
// logits. Rows are spread over the OpenMP threads; within a row, the vocabulary loops are plain
// loops that the compiler vectorises, with the exp of cpu/elementwise.h written for the vectoriser.
// The shard statistics and the backward take the vocab-parallel convention of logprob.h.
// Legend: N tokens, V vocab (columns held here).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/logprob_args.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Partial sums over this many columns stay in f32 (vector lanes), then go into an f64 total, so
// the rounding error of a 150k-column row stays at the f32 level of one short sum.
constexpr int64_t kSumChunk = 512;
// Below this many logits the threads cost more than they save.
constexpr int64_t kParallelMin = 1 << 15;

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

// The ids (checked up front by check_logprob_args, outside the parallel regions).
Targets targets_of(TensorView targets_N) {
  const bool is_i32 = targets_N.dtype() == DType::i32;
  return {is_i32 ? targets_N.data<int32_t>() : nullptr, is_i32 ? nullptr : targets_N.data<int64_t>(),
          targets_N.stride(0)};
}

LogprobColumns check_common(const LogprobParams& params, TensorView logits_NV, TensorView targets_N) {
  const LogprobColumns columns = check_logprob_args(params, logits_NV, targets_N);
  RF_CHECK(logits_NV.dtype() == DType::f32 || logits_NV.dtype() == DType::bf16,
           "logits_NV: the cpu kernels take f32 or bf16, got {}", dtype_name(logits_NV.dtype()));
  return columns;
}

// Over columns [0, V) of a row x: the max of x, and with d = (x - max) / T (x - x_max is exact for
// the x near x_max that carry the probability) sum e^d and sum e^d d, in f32 chunks added in f64.
struct RowSums {
  float x_max;
  double sum_exp, sum_exp_d;
};

template <class T>
RowSums row_sums(const T* x, int64_t V, float inv_t) {
  float x_max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : x_max)
  for (int64_t v = 0; v < V; ++v) x_max = std::max(x_max, load(x[v]));
  double sum_exp = 0, sum_exp_d = 0;
  for (int64_t v0 = 0; v0 < V; v0 += kSumChunk) {
    const int64_t v1 = std::min(V, v0 + kSumChunk);
    float chunk_exp = 0, chunk_exp_d = 0;
#pragma omp simd reduction(+ : chunk_exp, chunk_exp_d)
    for (int64_t v = v0; v < v1; ++v) {
      const float d = (load(x[v]) - x_max) * inv_t;
      const float e = exp_nonpositive(d);
      chunk_exp += e;
      chunk_exp_d += e * d;
    }
    sum_exp += chunk_exp;
    sum_exp_d += chunk_exp_d;
  }
  return {x_max, sum_exp, sum_exp_d};
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
    // With d = z - max z: lse = max z + log sum e^d, and sum p z = max z + sum e^d d / sum e^d, so
    // entropy = log sum e^d - sum e^d d / sum e^d, free of the large max z.
    const auto [x_max, sum_exp, sum_exp_d] = row_sums(x, V, inv_t);
    const double log_sum = std::log(sum_exp);
    const int64_t t = targets[n];
    logp[n] = t < 0 ? 0.0f : float((double(load(x[t])) - x_max) / temperature - log_sum);
    lse[n] = float(double(x_max) / temperature + log_sum);
    if (entropy.data) entropy[n] = float(log_sum - sum_exp_d / sum_exp);
  }
}

// Shard statistics (logprob.h) of the first `real` columns of each row.
template <class T>
void shard_stats_rows(double temperature, Rows<const T> logits, int64_t N, const LogprobColumns& columns,
                      Targets targets, Rows<float> stats) {
  const float inv_t = float(1.0 / temperature);
  const float minus_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static) if (N * columns.real >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits.data + n * logits.row_stride;
    float* out = stats.data + n * stats.row_stride;
    const int64_t t = targets[n];
    out[kShardTarget] = columns.holds(t) ? float(double(load(x[t - columns.vocab_start])) / temperature) : minus_inf;
    if (columns.real == 0) {
      out[kShardMax] = minus_inf;
      out[kShardSumExp] = out[kShardSumExpDelta] = 0.0f;
      continue;
    }
    const auto [x_max, sum_exp, sum_exp_d] = row_sums(x, columns.real, inv_t);
    out[kShardMax] = float(double(x_max) / temperature);
    out[kShardSumExp] = float(sum_exp);
    out[kShardSumExpDelta] = float(sum_exp_d);
  }
}

template <class T>
void backward_rows(double temperature, Rows<const T> logits, int64_t N, const LogprobColumns& columns, Targets targets,
                   Tokens lse_N, Tokens entropy_N, Tokens dlogp_N, Tokens dentropy_N, Rows<T> dlogits) {
  const float inv_t = float(1.0 / temperature);
#pragma omp parallel for schedule(static) if (N * columns.V >= kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits.data + n * logits.row_stride;
    T* dx = dlogits.data + n * dlogits.row_stride;
    const int64_t t = columns.holds(targets[n]) ? targets[n] - columns.vocab_start : -1;  // local column
    const double lse = lse_N[n];
    const double dlogp = targets[n] < 0 ? 0.0 : double(dlogp_N[n]);
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
    for (int64_t v = 0; v < columns.real; ++v) {
      const float d = (load(x[v]) - a) * inv_t - b;
      store(dx[v], -exp_nonpositive(d) * (alpha + beta * d));
    }
    for (int64_t v = columns.real; v < columns.V; ++v) store(dx[v], 0.0f);  // padding: no gradient
    if (t >= 0) {  // the target column again, in f64, with its 1[v = target] term
      const double d = double(load(x[t])) / temperature - lse;
      const double p = std::exp(d);
      store(dx[t], float((dlogp * (1.0 - p) - dentropy * p * (d + entropy)) / temperature));
    }
  }
}

}  // namespace

void logprob_forward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView logp_N,
                     TensorView entropy_N, TensorView lse_N) {
  check_whole_vocabulary(check_common(params, logits_NV, targets_N));
  const int64_t N = logits_NV.size(0), V = logits_NV.size(1);
  check_per_token(logp_N, N, "logp_N");
  check_per_token(lse_N, N, "lse_N");
  if (!entropy_N.empty()) check_per_token(entropy_N, N, "entropy_N");
  const Targets targets = targets_of(targets_N);

  if (logits_NV.dtype() == DType::f32)
    forward_rows<float>(params.temperature, {logits_NV.data<float>(), logits_NV.stride(0)}, N, V, targets,
                        tokens(logp_N), tokens(entropy_N), tokens(lse_N));
  else
    forward_rows<bf16>(params.temperature, {logits_NV.data<bf16>(), logits_NV.stride(0)}, N, V, targets,
                       tokens(logp_N), tokens(entropy_N), tokens(lse_N));
}

void logprob_shard_stats(const LogprobParams& params, TensorView logits_NV, TensorView targets_N,
                         TensorView stats_N4) {
  const LogprobColumns columns = check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0);
  check_shape(stats_N4, Shape{N, kNumShardStats}, "stats_N4");
  check_dtype(stats_N4, DType::f32, "stats_N4");
  RF_CHECK(stats_N4.inner_contiguous(), "stats_N4: expected a contiguous inner dim, got {}", stats_N4.describe());
  const Rows<float> stats{stats_N4.data<float>(), stats_N4.stride(0)};
  if (logits_NV.dtype() == DType::f32)
    shard_stats_rows<float>(params.temperature, {logits_NV.data<float>(), logits_NV.stride(0)}, N, columns,
                            targets_of(targets_N), stats);
  else
    shard_stats_rows<bf16>(params.temperature, {logits_NV.data<bf16>(), logits_NV.stride(0)}, N, columns,
                           targets_of(targets_N), stats);
}

void logprob_backward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView lse_N,
                      TensorView entropy_N, TensorView dlogp_N, TensorView dentropy_N, TensorView dlogits_NV) {
  const LogprobColumns columns = check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0);
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
  const Targets targets = targets_of(targets_N);
  const Tokens entropy = with_entropy ? tokens(entropy_N) : Tokens{};
  const Tokens dentropy = with_entropy ? tokens(dentropy_N) : Tokens{};

  if (logits_NV.dtype() == DType::f32)
    backward_rows<float>(params.temperature, {logits_NV.data<float>(), logits_NV.stride(0)}, N, columns, targets,
                         tokens(lse_N), entropy, tokens(dlogp_N), dentropy,
                         {dlogits_NV.data<float>(), dlogits_NV.stride(0)});
  else
    backward_rows<bf16>(params.temperature, {logits_NV.data<bf16>(), logits_NV.stride(0)}, N, columns, targets,
                        tokens(lse_N), entropy, tokens(dlogp_N), dentropy,
                        {dlogits_NV.data<bf16>(), dlogits_NV.stride(0)});
}

}  // namespace rf::kernels::RF_CPU_NS
