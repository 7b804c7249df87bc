// Loop twin of agg_loss: verl's formulas as written in core_algos.agg_loss, one row at a time,
// instead of LossAggregation's per-token weights.
//
// Dimension legend: B batch (responses), T response tokens.
#include "rl/agg_loss.h"
#include "rl/masked_stats.h"

namespace rf::rl {

double agg_loss_loop(TensorView loss_BT, TensorView mask_BT, AggMode mode, const VerlBatchInfo& info) {
  const Matrix loss = read_matrix(loss_BT, "loss_BT");
  const Matrix mask = read_mask(mask_BT, "mask_BT");
  check_same_shape(loss, "loss_BT", mask, "mask_BT");
  double token_sum = 0, num_tokens = 0, seq_sum = 0, seq_mean_sum = 0, num_seqs = 0;
  for (int64_t b = 0; b < loss.rows; ++b) {
    double row_sum = 0, row_tokens = 0;
    for (int64_t t = 0; t < loss.cols; ++t) {
      if (mask(b, t) == 0.0) continue;
      row_sum += loss(b, t);
      row_tokens += 1;
    }
    token_sum += row_sum;
    num_tokens += row_tokens;
    if (row_tokens == 0) continue;  // verl's seq_mask excludes fully masked rows
    seq_sum += row_sum;
    seq_mean_sum += row_sum / masked_count_divisor(row_tokens, loss.dtype);
    num_seqs += 1;
  }
  const double dp = double(info.dp_size);
  const double T = info.batch_num_tokens.value_or(num_tokens);
  const double S = info.global_batch_size.value_or(num_seqs);
  switch (mode) {
    case AggMode::token_mean:
      return T == 0 ? 0.0 : token_sum / T * dp;
    case AggMode::seq_mean_token_sum:
      return S == 0 ? 0.0 : seq_sum / S * dp;
    case AggMode::seq_mean_token_mean:
      return S == 0 ? 0.0 : seq_mean_sum / S * dp;
    case AggMode::seq_mean_token_sum_norm: {
      const double F = info.loss_scale_factor.value_or(double(loss.cols));
      return F == 0 ? 0.0 : token_sum / F;
    }
  }
  return 0.0;
}

}  // namespace rf::rl
