// What the policy losses share: their checked operands, the log-ratio, the rollout IS weights and
// the metrics' masked means. Internal to src/rl.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <optional>

#include "rl/matrix.h"
#include "rl/policy_loss.h"

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

}  // namespace rf::rl
