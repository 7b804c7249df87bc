// What the policy losses share: their checked operands, the log-ratio, the rollout IS weights, the
// metrics' masked means and the aggregation of a per-token loss with its gradient. Internal to src/rl.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <optional>

#include "rl/matrix.h"
#include "rl/policy_loss.h"
#include "rl/subgradients.h"

namespace rf::rl {

struct PolicyLossOperands {
  Matrix old_log_prob;  // (B, T), all four the same shape
  Matrix log_prob;
  Matrix advantages;
  Matrix mask;
  std::optional<Matrix> rollout_is_weights;
};

PolicyLossOperands read_policy_loss_operands(const PolicyLossInputs& in);

enum class LogRatioClamp : uint8_t { none, pm20 };  // pm20: verl's ±20 clamp before exp, for stability

// δ = log_prob - old_log_prob.
Matrix log_ratio(const PolicyLossOperands& op, LogRatioClamp clamp);
// verl's ppo_kl metric: masked_mean(-δ).
double ppo_kl(const Matrix& log_ratio, const Matrix& mask);
// A ratio bound such as 1 - clip_ratio_low, formed in f64 and rounded to the operands' dtype, as
// torch.clamp does with a Python float.
double ratio_bound(const PolicyLossOperands& op, double bound);
// loss *= rollout IS weights, when given.
void apply_rollout_is_weights(const PolicyLossOperands& op, Matrix& loss);

// dδ/dlog_prob: 1, or 0 where the clamp holds δ at ±20 (the clamp's bounds pass the gradient).
double log_ratio_grad(const PolicyLossOperands& op, size_t i, LogRatioClamp clamp);

// The aggregate of the per-token losses after the rollout IS weights (apply_rollout_is_weights), and,
// when dlog_prob_BT is given, its gradient: aggregation weight · IS weight · dloss/dlog_prob at the
// tokens of the mask, and exactly 0 elsewhere (whatever dloss holds there).
double aggregate_policy_loss(const PolicyLossOperands& op, const LossAggregation& aggregation, Matrix& loss,
                             const Matrix& dloss, TensorView dlog_prob_BT);

}  // namespace rf::rl
