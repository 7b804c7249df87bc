// The per-token recursions (gae, reinforce_plus_plus, remax), vectorised as verl writes them: one
// backward sweep over t that updates all B rows at once. Their loop twins are in
// token_advantages_loop.cpp.
//
// Dimension legend: B batch (responses), T response tokens.
#include "rl/advantage_operands.h"
#include "rl/masked_stats.h"

namespace rf::rl {

// Backward over t: δ = r_t + γ·next_value - V_t, g = δ + γλ·last_gae; a valid token (m_t = 1)
// takes next_value = V_t and last_gae = g, a masked one (a multi-turn observation, padding) keeps
// both, so masked slots carry the advantage of the next valid token to their right and the value
// chain jumps over them. returns = A + V before whitening; A is whitened over the whole batch and,
// as in verl, not re-masked.
void compute_gae_advantages(const AdvantageInputs& in, const AdvantageConfig& config, const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const Matrix values = read_values(in, op.rewards);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  std::vector<double> next_value_B(size_t(B), 0.0), last_gae_B(size_t(B), 0.0);
  Matrix advantages(B, T, op.rewards.dtype);
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t b = 0; b < B; ++b) {
      const double delta = op.rewards(b, t) + config.gamma * next_value_B[size_t(b)] - values(b, t);
      const double gae = delta + config.gamma * config.lam * last_gae_B[size_t(b)];
      if (op.mask(b, t) != 0.0) {
        next_value_B[size_t(b)] = values(b, t);
        last_gae_B[size_t(b)] = gae;
      }
      advantages(b, t) = last_gae_B[size_t(b)];
    }
  }
  Matrix returns = advantages;
  for (size_t i = 0; i < returns.values.size(); ++i) returns.values[i] += values.values[i];
  write_advantages(masked_whiten(advantages, op.mask, MeanShift::remove), returns, out);
}

// Backward over t: G = r_t + γ·running, returns_t = G, then running = G·m_t. A masked token stores
// its return unmasked and resets the running return, so rewards do not flow back past it.
// advantages = whiten(returns)·m; the returns come out as computed (not masked).
void compute_reinforce_plus_plus_advantages(const AdvantageInputs& in, const AdvantageConfig& config,
                                            const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  std::vector<double> running_B(size_t(B), 0.0);
  Matrix returns(B, T, op.rewards.dtype);
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t b = 0; b < B; ++b) {
      running_B[size_t(b)] = op.rewards(b, t) + config.gamma * running_B[size_t(b)];
      returns(b, t) = running_B[size_t(b)];
      running_B[size_t(b)] *= op.mask(b, t);
    }
  }
  Matrix advantages = masked_whiten(returns, op.mask, MeanShift::remove);
  for (size_t i = 0; i < advantages.values.size(); ++i) advantages.values[i] *= op.mask.values[i];
  write_advantages(advantages, returns, out);
}

// returns = reverse cumulative sum of r·m (undiscounted); advantages = returns - baseline_b·m.
void compute_remax_advantages(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const std::vector<double> baseline_B = read_reward_baselines(in, op.rewards);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  std::vector<double> running_B(size_t(B), 0.0);
  Matrix returns(B, T, op.rewards.dtype), advantages(B, T, op.rewards.dtype);
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t b = 0; b < B; ++b) {
      running_B[size_t(b)] += op.rewards(b, t) * op.mask(b, t);
      returns(b, t) = running_B[size_t(b)];
      advantages(b, t) = returns(b, t) - baseline_B[size_t(b)] * op.mask(b, t);
    }
  }
  write_advantages(advantages, returns, out);
}

}  // namespace rf::rl
