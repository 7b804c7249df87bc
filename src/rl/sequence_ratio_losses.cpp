// The policy losses built on a per-sequence ratio: gspo (the exp of the mean token log-ratio, clipped
// PPO-style) and geo_mean (GMPO: the geometric mean of token-clipped ratios). See policy_loss.h.
// Gradients: gspo's token ratio log_prob - sg(log_prob) + sg(seq log-ratio) makes each token's loss
// depend on its own log-prob only, with d ratio/dlog_prob = ratio (0 where the cap at 10 holds); a
// geo_mean sequence loss depends on every token of its row through the mean clipped log-ratio.
//
// Dimension legend: B batch (responses), T response tokens.
#include <algorithm>
#include <cmath>

#include "rl/masked_stats.h"
#include "rl/policy_loss_operands.h"

namespace rf::rl {

PolicyLossResult policy_loss_gspo(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                  const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::none);
  const std::vector<double> delta_sum_B = masked_row_sums(delta, op.mask);
  const std::vector<double> length_B = masked_row_sums(op.mask, op.mask);
  const double low = ratio_bound(op, 1.0 - config.low()), high = ratio_bound(op, 1.0 + config.high());
  Matrix loss(delta.rows, delta.cols, delta.dtype), dloss(loss), clipped(loss);
  for (int64_t b = 0; b < loss.rows; ++b) {
    // verl's token ratio log_prob - sg(log_prob) + sg(seq log-ratio) equals the sequence log-ratio
    // in value; the cap at 10 is verl's, for stability.
    const double seq_log_ratio = delta_sum_B[size_t(b)] / std::max(length_B[size_t(b)], 1.0);
    const double ratio = std::exp(std::min(seq_log_ratio, 10.0));
    const double dratio = seq_log_ratio <= 10.0 ? ratio : 0.0;  // clamp(max=10) passes its bound
    for (int64_t t = 0; t < loss.cols; ++t) {
      const double advantage = op.advantages(b, t);
      const double unclipped_loss = -advantage * ratio, clipped_loss = -advantage * std::clamp(ratio, low, high);
      const double unclipped_share = max_grad_share(unclipped_loss, clipped_loss);
      clipped(b, t) = clipped_loss > unclipped_loss ? 1.0 : 0.0;
      loss(b, t) = std::max(unclipped_loss, clipped_loss);
      dloss(b, t) = -advantage * dratio * (unclipped_share + (1.0 - unclipped_share) * clamp_grad(ratio, low, high));
    }
  }
  return {
      aggregate_policy_loss(op, aggregation.with_mode(AggMode::seq_mean_token_mean), loss, dloss, dlog_prob_BT),
      {{"pg_clipfrac", masked_mean(clipped, op.mask)}, {"ppo_kl", ppo_kl(delta, op.mask)}, {"pg_clipfrac_lower", 0.0}}};
}

PolicyLossResult policy_loss_geo_mean(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                      const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::none);
  const double low = -ratio_bound(op, config.low()), high = ratio_bound(op, config.high());
  // Token-level clip on the side the advantage's sign selects: sign(A)·min(sign(A)·δ, sign(A)·clamp(δ)),
  // and its derivative by δ: sign(A)² times min's share of δ, plus min's share of the clamp where it passes.
  Matrix clipped_delta(delta.rows, delta.cols, delta.dtype), dclipped_delta(clipped_delta),
      clipped_upper(clipped_delta), clipped_lower(clipped_delta);
  for (size_t i = 0; i < delta.values.size(); ++i) {
    const double advantage = op.advantages.values[i];
    const double sign_a = sign(advantage);
    const double clamped = std::clamp(delta.values[i], low, high);
    clipped_delta.values[i] = sign_a * std::min(sign_a * delta.values[i], sign_a * clamped);
    const double unclamped_share = max_grad_share(sign_a * clamped, sign_a * delta.values[i]);
    dclipped_delta.values[i] =
        sign_a * sign_a * (unclamped_share + (1.0 - unclamped_share) * clamp_grad(delta.values[i], low, high));
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
  double dloss_B = 0;  // d(pg_loss)/d(loss_B[b]), the same for every row
  const double pg_loss = aggregation.sequence_mean(loss_B, &dloss_B);
  if (!dlog_prob_BT.empty()) {
    // d loss_B[b]/dlog_prob[b, t] = loss_B[b] · m[b, t] / divisor_b · dclipped_delta[b, t] (the IS weight,
    // a constant, is inside loss_B[b]).
    Matrix dlog_prob(delta.rows, delta.cols, DType::f64);
    for (int64_t b = 0; b < delta.rows; ++b) {
      const double divisor = masked_count_divisor(length_B[size_t(b)], delta.dtype);
      for (int64_t t = 0; t < delta.cols; ++t)
        if (op.mask(b, t) != 0.0) dlog_prob(b, t) = dloss_B * loss_B[size_t(b)] / divisor * dclipped_delta(b, t);
    }
    write_matrix(dlog_prob, dlog_prob_BT, "dlog_prob_BT");
  }
  return {pg_loss,
          {{"pg_clipfrac", masked_mean(clipped_upper, op.mask)},
           {"ppo_kl", ppo_kl(delta, op.mask)},
           {"pg_clipfrac_lower", masked_mean(clipped_lower, op.mask)}}};
}

}  // namespace rf::rl
