// The policy losses without ratio clipping: gpg (plain policy gradient) and kl_cov (a KL penalty on
// the tokens whose log-prob covaries most with their advantage). See policy_loss.h.
// Gradients: gpg's is -A; kl_cov's is -A·ρ, plus ppo_kl_coef·sign(δ) on the penalised tokens (torch's
// |δ| has gradient 0 at δ = 0; the choice of tokens, made on detached values, has none).
//
// Dimension legend: B batch (responses), T response tokens.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "rl/masked_stats.h"
#include "rl/policy_loss_operands.h"

namespace rf::rl {

PolicyLossResult policy_loss_gpg(const PolicyLossInputs& in, const PolicyLossConfig&,
                                 const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  const PolicyLossOperands op = read_policy_loss_operands(in);
  Matrix loss = op.log_prob, dloss = op.advantages;
  for (size_t i = 0; i < loss.values.size(); ++i) {
    loss.values[i] *= -op.advantages.values[i];
    dloss.values[i] = -op.advantages.values[i];
  }
  return {aggregate_policy_loss(op, aggregation, loss, dloss, dlog_prob_BT), {}};
}

PolicyLossResult policy_loss_kl_cov(const PolicyLossInputs& in, const PolicyLossConfig& config,
                                    const LossAggregation& aggregation, TensorView dlog_prob_BT) {
  RF_CHECK(config.kl_cov_ratio > 0 && config.kl_cov_ratio <= 1,
           "policy_loss.kl_cov_ratio: expected a fraction of the tokens in (0, 1], got {}", config.kl_cov_ratio);
  const PolicyLossOperands op = read_policy_loss_operands(in);
  const Matrix delta = log_ratio(op, LogRatioClamp::none);
  Matrix loss(delta.rows, delta.cols, delta.dtype), dloss(loss), abs_delta(loss);
  for (size_t i = 0; i < loss.values.size(); ++i) {
    loss.values[i] = -op.advantages.values[i] * std::exp(delta.values[i]);
    dloss.values[i] = loss.values[i];  // d(-A·ρ)/dlog_prob = -A·ρ
    abs_delta.values[i] = std::abs(delta.values[i]);
  }
  // The valid tokens in row-major order and the centred covariance of advantage and log-prob.
  std::vector<size_t> valid;
  for (size_t i = 0; i < op.mask.values.size(); ++i)
    if (op.mask.values[i] != 0.0) valid.push_back(i);
  if (!valid.empty()) {
    double mean_advantage = 0, mean_log_prob = 0;
    for (size_t i : valid) {
      mean_advantage += op.advantages.values[i];
      mean_log_prob += op.log_prob.values[i];
    }
    mean_advantage /= double(valid.size());
    mean_log_prob /= double(valid.size());
    std::vector<double> covariance(valid.size());
    for (size_t k = 0; k < valid.size(); ++k)
      covariance[k] =
          (op.advantages.values[valid[k]] - mean_advantage) * (op.log_prob.values[valid[k]] - mean_log_prob);
    // Python's int(N * ratio) truncates; verl penalises at least one token.
    const size_t num_penalised = std::max<size_t>(1, size_t(double(valid.size()) * config.kl_cov_ratio));
    std::vector<size_t> order(valid.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + ptrdiff_t(num_penalised), order.end(), [&](size_t a, size_t b) {
      return covariance[a] > covariance[b] || (covariance[a] == covariance[b] && a < b);
    });
    for (size_t k = 0; k < num_penalised; ++k) {
      const size_t i = valid[order[k]];
      loss.values[i] += config.ppo_kl_coef * abs_delta.values[i];
      dloss.values[i] += config.ppo_kl_coef * sign(delta.values[i]);
    }
  }
  return {aggregate_policy_loss(op, aggregation, loss, dloss, dlog_prob_BT),
          {{"ppo_kl", masked_mean(abs_delta, op.mask)}}};
}

}  // namespace rf::rl
