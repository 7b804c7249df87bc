// The policy losses built on the per-token ratio ρ = exp(clamp(δ, -20, 20)): vanilla (PPO clip with
// dual clip), cispo and sapo. See policy_loss.h for the formulas. Each loop forms a token's loss and
// its derivative dloss/dlog_prob side by side, the derivative by the chain rule through the same terms
// (dρ/dlog_prob = ρ·dδ/dlog_prob).
//
// Dimension legend: B batch (responses), T response tokens.
#include <algorithm>
#include <cmath>

#include "rl/masked_stats.h"
#include "rl/policy_loss_operands.h"

namespace rf::rl {

PolicyLossResult policy_loss_vanilla(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                     const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  RF_CHECK(config.clip_ratio_c > 1.0, "clip_ratio_c: expected > 1.0 (the dual-clip bound of the ratio), got {}",
           config.clip_ratio_c);
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::pm20);
  const double low = ratio_bound(op, 1.0 - config.low()), high = ratio_bound(op, 1.0 + config.high());
  Matrix loss(delta.rows, delta.cols, delta.dtype), dloss(loss), clipped(loss), clipped_lower(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    const double advantage = op.advantages.values[i], ratio = std::exp(delta.values[i]);
    const double dratio = ratio * log_ratio_grad(op, i, LogRatioClamp::pm20);
    const double unclipped_loss = -advantage * ratio, dunclipped_loss = -advantage * dratio;
    const double clipped_loss = -advantage * std::clamp(ratio, low, high);
    const double dclipped_loss = -advantage * clamp_grad(ratio, low, high) * dratio;
    const double ppo_loss = std::max(unclipped_loss, clipped_loss);
    const double unclipped_share = max_grad_share(unclipped_loss, clipped_loss);
    const double dppo_loss = unclipped_share * dunclipped_loss + (1.0 - unclipped_share) * dclipped_loss;
    const double dual_clip_loss = -advantage * config.clip_ratio_c;  // a constant: min() passes only ppo's share
    clipped.values[i] = clipped_loss > unclipped_loss ? 1.0 : 0.0;
    clipped_lower.values[i] = ppo_loss > dual_clip_loss && advantage < 0 ? 1.0 : 0.0;
    loss.values[i] = advantage < 0 ? std::min(dual_clip_loss, ppo_loss) : ppo_loss;
    dloss.values[i] = advantage < 0 ? max_grad_share(dual_clip_loss, ppo_loss) * dppo_loss : dppo_loss;
  }
  return {aggregate_policy_loss(op, aggregation, loss, dloss, dlog_prob_BT),
          {{"pg_clipfrac", masked_mean(clipped, op.mask)},
           {"ppo_kl", ppo_kl(delta, op.mask)},
           {"pg_clipfrac_lower", masked_mean(clipped_lower, op.mask)}}};
}

PolicyLossResult policy_loss_cispo(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                   const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::pm20);
  const double low = ratio_bound(op, 1.0 - config.low()), high = ratio_bound(op, 1.0 + config.high());
  Matrix loss(delta.rows, delta.cols, delta.dtype), dloss(loss), clipped(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    const double ratio = std::exp(delta.values[i]);
    const double clipped_ratio = std::clamp(ratio, low, high);  // a constant for the gradient (verl's detach)
    clipped.values[i] = ratio != clipped_ratio ? 1.0 : 0.0;
    dloss.values[i] = -clipped_ratio * op.advantages.values[i];
    loss.values[i] = dloss.values[i] * op.log_prob.values[i];
  }
  return {
      aggregate_policy_loss(op, aggregation, loss, dloss, dlog_prob_BT),
      {{"pg_clipfrac", masked_mean(clipped, op.mask)}, {"ppo_kl", ppo_kl(delta, op.mask)}, {"pg_clipfrac_lower", 0.0}}};
}

PolicyLossResult policy_loss_sapo(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                  const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::pm20);
  Matrix loss(delta.rows, delta.cols, delta.dtype), dloss(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    const double advantage = op.advantages.values[i];
    const double tau = advantage > 0 ? config.tau_pos : config.tau_neg;
    const double ratio = std::exp(delta.values[i]);
    const double dratio = ratio * log_ratio_grad(op, i, LogRatioClamp::pm20);
    const double sigmoid = 1.0 / (1.0 + std::exp(-tau * (ratio - 1.0)));
    const double gate = sigmoid * (4.0 / tau), dgate = sigmoid * (1.0 - sigmoid) * tau * (4.0 / tau) * dratio;
    loss.values[i] = -gate * advantage;
    dloss.values[i] = -dgate * advantage;
  }
  return {aggregate_policy_loss(op, aggregation.with_mode(AggMode::seq_mean_token_mean), loss, dloss, dlog_prob_BT),
          {{"pg_clipfrac", 0.0}, {"ppo_kl", ppo_kl(delta, op.mask)}, {"pg_clipfrac_lower", 0.0}}};
}

}  // namespace rf::rl
