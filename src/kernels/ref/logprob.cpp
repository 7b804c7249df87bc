// Reference softmax cross-entropy with log-prob and entropy outputs: the formulas of logprob.h,
// one row at a time, every sum in f64 (logits of any dtype are read as f64). The shard statistics
// and the backward take the vocab-parallel convention (vocab_start, padding past vocab_size).
// Legend: N tokens, V vocab (columns held here).
#include <cmath>
#include <limits>

#include "core/element_access.h"
#include "kernels/logprob_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

DType output_dtype(DType logits_dtype) { return logits_dtype == DType::f64 ? DType::f64 : DType::f32; }

LogprobColumns check_common(const LogprobParams& params, TensorView logits_NV, TensorView targets_N) {
  const LogprobColumns columns = check_logprob_args(params, logits_NV, targets_N);
  const DType dtype = logits_NV.dtype();
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f64,
           "logits_NV: expected f32, bf16 or f64, got {}", dtype_name(dtype));
  return columns;
}

void check_per_token(TensorView t_N, int64_t N, DType dtype, const char* what) {
  check_shape(t_N, Shape{N}, what);
  check_dtype(t_N, dtype, what);
}

double logit(const TensorView& logits_NV, int64_t n, int64_t v) {
  return load_f64(logits_NV, n * logits_NV.stride(0) + v);
}

int64_t target(const TensorView& targets_N, int64_t n) {
  return int64_t(load_f64(targets_N, n * targets_N.stride(0)));
}

}  // namespace

void logprob_forward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView logp_N,
                     TensorView entropy_N, TensorView lse_N) {
  check_whole_vocabulary(check_common(params, logits_NV, targets_N));
  const int64_t N = logits_NV.size(0), V = logits_NV.size(1);
  const DType out = output_dtype(logits_NV.dtype());
  check_per_token(logp_N, N, out, "logp_N");
  check_per_token(lse_N, N, out, "lse_N");
  if (!entropy_N.empty()) check_per_token(entropy_N, N, out, "entropy_N");
  const double T = params.temperature;

  for (int64_t n = 0; n < N; ++n) {
    double z_max = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < V; ++v) z_max = std::max(z_max, logit(logits_NV, n, v) / T);
    double sum_exp = 0, sum_exp_z = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double z = logit(logits_NV, n, v) / T;
      sum_exp += std::exp(z - z_max);
      sum_exp_z += std::exp(z - z_max) * z;
    }
    const double lse = z_max + std::log(sum_exp);
    const int64_t t = target(targets_N, n);
    store_f64(logp_N, n * logp_N.stride(0), t < 0 ? 0.0 : logit(logits_NV, n, t) / T - lse);
    store_f64(lse_N, n * lse_N.stride(0), lse);
    if (!entropy_N.empty()) store_f64(entropy_N, n * entropy_N.stride(0), lse - sum_exp_z / sum_exp);
  }
}

void logprob_shard_stats(const LogprobParams& params, TensorView logits_NV, TensorView targets_N,
                         TensorView stats_N4) {
  const LogprobColumns columns = check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0);
  check_shape(stats_N4, Shape{N, kNumShardStats}, "stats_N4");
  check_dtype(stats_N4, output_dtype(logits_NV.dtype()), "stats_N4");
  const double T = params.temperature, minus_inf = -std::numeric_limits<double>::infinity();
  for (int64_t n = 0; n < N; ++n) {
    double z_max = minus_inf;
    for (int64_t v = 0; v < columns.real; ++v) z_max = std::max(z_max, logit(logits_NV, n, v) / T);
    double sum_exp = 0, sum_exp_delta = 0;
    for (int64_t v = 0; v < columns.real; ++v) {
      const double delta = logit(logits_NV, n, v) / T - z_max;
      sum_exp += std::exp(delta);
      sum_exp_delta += std::exp(delta) * delta;
    }
    const int64_t t = target(targets_N, n);
    const double target_z = columns.holds(t) ? logit(logits_NV, n, t - columns.vocab_start) / T : minus_inf;
    const double stats[kNumShardStats] = {z_max, sum_exp, sum_exp_delta, target_z};
    for (int64_t s = 0; s < kNumShardStats; ++s)
      store_f64(stats_N4, n * stats_N4.stride(0) + s * stats_N4.stride(1), stats[s]);
  }
}

void logprob_backward(const LogprobParams& params, TensorView logits_NV, TensorView targets_N, TensorView lse_N,
                      TensorView entropy_N, TensorView dlogp_N, TensorView dentropy_N, TensorView dlogits_NV) {
  const LogprobColumns columns = check_common(params, logits_NV, targets_N);
  const int64_t N = logits_NV.size(0), V = logits_NV.size(1);
  const DType out = output_dtype(logits_NV.dtype());
  check_per_token(lse_N, N, out, "lse_N");
  check_per_token(dlogp_N, N, out, "dlogp_N");
  const bool with_entropy = !dentropy_N.empty();
  if (with_entropy) {
    check_per_token(entropy_N, N, out, "entropy_N");
    check_per_token(dentropy_N, N, out, "dentropy_N");
  }
  check_shape(dlogits_NV, logits_NV.shape(), "dlogits_NV");
  check_dtype(dlogits_NV, logits_NV.dtype(), "dlogits_NV");
  RF_CHECK(dlogits_NV.inner_contiguous(), "dlogits_NV: expected a contiguous inner dim, got {}",
           dlogits_NV.describe());
  const double T = params.temperature;

  for (int64_t n = 0; n < N; ++n) {
    const double lse = load_f64(lse_N, n * lse_N.stride(0));
    const int64_t t = target(targets_N, n);
    const double dlogp = t < 0 ? 0.0 : load_f64(dlogp_N, n * dlogp_N.stride(0));
    const double entropy = with_entropy ? load_f64(entropy_N, n * entropy_N.stride(0)) : 0.0;
    const double dentropy = with_entropy ? load_f64(dentropy_N, n * dentropy_N.stride(0)) : 0.0;
    for (int64_t v = 0; v < V; ++v) {
      if (v >= columns.real) {  // padding: -inf logits, no probability, no gradient
        store_f64(dlogits_NV, n * dlogits_NV.stride(0) + v, 0.0);
        continue;
      }
      const double z = logit(logits_NV, n, v) / T;
      const double p = std::exp(z - lse);
      const double dz = dlogp * ((v + columns.vocab_start == t ? 1.0 : 0.0) - p) - dentropy * p * (z - lse + entropy);
      store_f64(dlogits_NV, n * dlogits_NV.stride(0) + v, dz / T);
    }
  }
}

}  // namespace rf::kernels::ref
