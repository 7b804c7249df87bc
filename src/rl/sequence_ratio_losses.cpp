// The policy losses built on a per-sequence ratio: gspo (the exp of the mean token log-ratio, clipped
// PPO-style) and geo_mean (GMPO: the geometric mean of token-clipped ratios). See policy_loss.h.
//
// Dimension legend: B batch (responses), T response tokens.
#include <algorithm>
#include <cmath>

#include "rl/masked_stats.h"
#include "rl/policy_loss_operands.h"

namespace rf::rl {

PolicyLossResult policy_loss_gspo(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                  const LossAggregation& aggregation) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::none);
  const std::vector<double> delta_sum_B = masked_row_sums(delta, op.mask);
  const std::vector<double> length_B = masked_row_sums(op.mask, op.mask);
  const double low = ratio_bound(op, 1.0 - config.low()), high = ratio_bound(op, 1.0 + config.high());
  Matrix loss(delta.rows, delta.cols, delta.dtype), clipped(loss);
  for (int64_t b = 0; b < loss.rows; ++b) {
    // verl's token ratio log_prob - sg(log_prob) + sg(seq log-ratio) equals the sequence log-ratio
    // in value; the cap at 10 is verl's, for stability.
    const double seq_log_ratio = delta_sum_B[size_t(b)] / std::max(length_B[size_t(b)], 1.0);
    const double ratio = std::exp(std::min(seq_log_ratio, 10.0));
    for (int64_t t = 0; t < loss.cols; ++t) {
      const double advantage = op.advantages(b, t);
      const double unclipped_loss = -advantage * ratio, clipped_loss = -advantage * std::clamp(ratio, low, high);
      clipped(b, t) = clipped_loss > unclipped_loss ? 1.0 : 0.0;
      loss(b, t) = std::max(unclipped_loss, clipped_loss);
    }
  }
  apply_rollout_is_weights(op, loss);
  return {
      aggregation.with_mode(AggMode::seq_mean_token_mean).aggregate(loss, op.mask),
      {{"pg_clipfrac", masked_mean(clipped, op.mask)}, {"ppo_kl", ppo_kl(delta, op.mask)}, {"pg_clipfrac_lower", 0.0}}};
}

PolicyLossResult policy_loss_geo_mean(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                      const LossAggregation& aggregation) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::none);
  const double low = -ratio_bound(op, config.low()), high = ratio_bound(op, config.high());
  // Token-level clip on the side the advantage's sign selects: sign(A)·min(sign(A)·δ, sign(A)·clamp(δ)).
  Matrix clipped_delta(delta.rows, delta.cols, delta.dtype), clipped_upper(clipped_delta), clipped_lower(clipped_delta);
  for (size_t i = 0; i < delta.values.size(); ++i) {
    const double advantage = op.advantages.values[i];
    const double sign = advantage > 0 ? 1.0 : advantage < 0 ? -1.0 : 0.0;
    const double clamped = std::clamp(delta.values[i], low, high);
    clipped_delta.values[i] = sign * std::min(sign * delta.values[i], sign * clamped);
    const bool clipped = delta.values[i] != clamped;
    clipped_upper.values[i] = clipped && advantage > 0 ? 1.0 : 0.0;
    clipped_lower.values[i] = clipped && advantage < 0 ? 1.0 : 0.0;
  }
  const std::vector<double> log_ratio_sum_B = masked_row_sums(clipped_delta, op.mask);
  const std::vector<double> advantage_sum_B = masked_row_sums(op.advantages, op.mask);
  const std::vector<double> length_B = masked_row_sums(op.mask, op.mask);
  std::vector<double> loss_B(size_t(delta.rows));
  for (size_t b = 0; b < loss_B.size(); ++b) {
    const double divisor = masked_count_divisor(length_B[b], delta.dtype);
    loss_B[b] = -(advantage_sum_B[b] / divisor) * std::exp(log_ratio_sum_B[b] / divisor);
  }
  if (op.rollout_is_weights) {
    // Token weights become a sequence weight by their geometric mean (the 1e-10 guards log 0).
    Matrix log_weight = *op.rollout_is_weights;
    for (double& w : log_weight.values) w = std::log(round_to(log_weight.dtype, w + 1e-10));
    const std::vector<double> log_weight_sum_B = masked_row_sums(log_weight, op.mask);
    for (size_t b = 0; b < loss_B.size(); ++b)
      loss_B[b] *= std::exp(log_weight_sum_B[b] / masked_count_divisor(length_B[b], delta.dtype));
  }
  return {aggregation.sequence_mean(loss_B),
          {{"pg_clipfrac", masked_mean(clipped_upper, op.mask)},
           {"ppo_kl", ppo_kl(delta, op.mask)},
           {"pg_clipfrac_lower", masked_mean(clipped_lower, op.mask)}}};
}

}  // namespace rf::rl
