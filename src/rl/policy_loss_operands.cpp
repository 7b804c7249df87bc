#include "rl/policy_loss_operands.h"

#include <algorithm>

#include "rl/masked_stats.h"

namespace rf::rl {

PolicyLossOperands read_policy_loss_operands(const PolicyLossInputs& in) {
  PolicyLossOperands op{read_matrix(in.old_log_prob_BT, "old_log_prob_BT"), read_matrix(in.log_prob_BT, "log_prob_BT"),
                        read_matrix(in.advantages_BT, "advantages_BT"),
                        read_mask(in.response_mask_BT, "response_mask_BT"), std::nullopt};
  check_same_shape(op.log_prob, "log_prob_BT", op.old_log_prob, "old_log_prob_BT");
  check_same_shape(op.log_prob, "log_prob_BT", op.advantages, "advantages_BT");
  check_same_shape(op.log_prob, "log_prob_BT", op.mask, "response_mask_BT");
  if (!in.rollout_is_weights_BT.empty()) {
    op.rollout_is_weights = read_matrix(in.rollout_is_weights_BT, "rollout_is_weights_BT");
    check_same_shape(op.log_prob, "log_prob_BT", *op.rollout_is_weights, "rollout_is_weights_BT");
  }
  return op;
}

Matrix log_ratio(const PolicyLossOperands& op, LogRatioClamp clamp) {
  Matrix delta = op.log_prob;
  for (size_t i = 0; i < delta.values.size(); ++i) {
    delta.values[i] -= op.old_log_prob.values[i];
    if (clamp == LogRatioClamp::pm20) delta.values[i] = std::clamp(delta.values[i], -20.0, 20.0);
  }
  return delta;
}

double ppo_kl(const Matrix& log_ratio, const Matrix& mask) { return -masked_mean(log_ratio, mask); }

double ratio_bound(const PolicyLossOperands& op, double bound) { return round_to(op.log_prob.dtype, bound); }

void apply_rollout_is_weights(const PolicyLossOperands& op, Matrix& loss) {
  if (!op.rollout_is_weights) return;
  for (size_t i = 0; i < loss.values.size(); ++i) loss.values[i] *= op.rollout_is_weights->values[i];
}

double log_ratio_grad(const PolicyLossOperands& op, size_t i, LogRatioClamp clamp) {
  if (clamp == LogRatioClamp::none) return 1.0;
  return clamp_grad(op.log_prob.values[i] - op.old_log_prob.values[i], -20.0, 20.0);
}

double aggregate_policy_loss(const PolicyLossOperands& op, const LossAggregation& aggregation, Matrix& loss,
                             const Matrix& dloss, TensorView dlog_prob_BT) {
  apply_rollout_is_weights(op, loss);
  if (dlog_prob_BT.empty()) return aggregation.aggregate(loss, op.mask);
  Matrix weights;
  const double result = aggregation.aggregate(loss, op.mask, &weights);
  for (size_t i = 0; i < weights.values.size(); ++i) {
    if (op.mask.values[i] == 0.0) continue;  // weights are 0 there; dloss may not be finite
    weights.values[i] *= dloss.values[i] * (op.rollout_is_weights ? op.rollout_is_weights->values[i] : 1.0);
  }
  write_matrix(weights, dlog_prob_BT, "dlog_prob_BT");
  return result;
}

}  // namespace rf::rl
