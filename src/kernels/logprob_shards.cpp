#include "kernels/logprob_shards.h"

#include <cmath>
#include <limits>

#include "core/element_access.h"
#include "kernels/logprob.h"

namespace rf::kernels {

void combine_logprob_shards(TensorView stats_RN4, TensorView targets_N, TensorView logp_N, TensorView entropy_N,
                            TensorView lse_N) {
  RF_CHECK(stats_RN4.rank() == 3 && stats_RN4.size(2) == kNumShardStats,
           "combine_logprob_shards: stats must be [R, N, {}], got {}", kNumShardStats, stats_RN4.describe());
  const int64_t R = stats_RN4.size(0), N = stats_RN4.size(1);
  const DType dtype = stats_RN4.dtype();
  RF_CHECK(dtype == DType::f32 || dtype == DType::f64, "combine_logprob_shards: stats must be f32 or f64, got {}",
           dtype_name(dtype));
  check_shape(targets_N, Shape{N}, "targets_N");
  check_shape(logp_N, Shape{N}, "logp_N");
  check_shape(lse_N, Shape{N}, "lse_N");
  check_dtype(logp_N, dtype, "logp_N");
  check_dtype(lse_N, dtype, "lse_N");
  if (!entropy_N.empty()) {
    check_shape(entropy_N, Shape{N}, "entropy_N");
    check_dtype(entropy_N, dtype, "entropy_N");
  }
  auto stat = [&](int64_t r, int64_t n, LogprobShardStat s) {
    return load_f64(stats_RN4, r * stats_RN4.stride(0) + n * stats_RN4.stride(1) + s * stats_RN4.stride(2));
  };
  for (int64_t n = 0; n < N; ++n) {
    double max_all = -std::numeric_limits<double>::infinity();
    double target_z = -std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < R; ++r) {
      max_all = std::max(max_all, stat(r, n, kShardMax));
      target_z = std::max(target_z, stat(r, n, kShardTarget));
    }
    double sum_exp = 0, sum_exp_delta = 0;
    for (int64_t r = 0; r < R; ++r) {
      const double m = stat(r, n, kShardMax);
      if (m == -std::numeric_limits<double>::infinity()) continue;  // a shard of padding only
      const double w = std::exp(m - max_all), s = stat(r, n, kShardSumExp);
      sum_exp += w * s;
      sum_exp_delta += w * (stat(r, n, kShardSumExpDelta) + s * (m - max_all));
    }
    const double log_sum = std::log(sum_exp);
    const double lse = max_all + log_sum;
    const int64_t target = int64_t(load_f64(targets_N, n * targets_N.stride(0)));
    RF_CHECK(target < 0 || target_z > -std::numeric_limits<double>::infinity(),
             "combine_logprob_shards: no rank holds target {} of token {}", target, n);
    store_f64(logp_N, n * logp_N.stride(0), target < 0 ? 0.0 : target_z - lse);
    store_f64(lse_N, n * lse_N.stride(0), lse);
    if (!entropy_N.empty()) store_f64(entropy_N, n * entropy_N.stride(0), log_sum - sum_exp_delta / sum_exp);
  }
}

}  // namespace rf::kernels
