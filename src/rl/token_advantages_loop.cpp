// Loop twins of the per-token recursions: each value written from its closed form, one position at
// a time (O(T²) per row), instead of the backward sweep of token_advantages.cpp.
//
// Dimension legend: B batch (responses), T response tokens.
#include <cmath>

#include "rl/advantage_operands.h"
#include "rl/masked_stats.h"

namespace rf::rl {

// Unrolled GAE: with p_0 < p_1 < ... the valid positions at or after t,
//   A_t = Σ_k (γλ)^k δ_{p_k},  δ_p = r_p + γ·V_{next valid after p} - V_p  (V past the end = 0).
// A masked t therefore gets the advantage of the first valid token after it.
void compute_gae_advantages_loop(const AdvantageInputs& in, const AdvantageConfig& config,
                                 const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const Matrix values = read_values(in, op.rewards);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  Matrix advantages(B, T, op.rewards.dtype), returns(B, T, op.rewards.dtype);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> valid;
      for (int64_t p = t; p < T; ++p)
        if (op.mask(b, p) != 0.0) valid.push_back(p);
      double advantage = 0;
      for (size_t k = 0; k < valid.size(); ++k) {
        const int64_t p = valid[k];
        const double next_value = k + 1 < valid.size() ? values(b, valid[k + 1]) : 0.0;
        const double delta = op.rewards(b, p) + config.gamma * next_value - values(b, p);
        advantage += std::pow(config.gamma * config.lam, double(k)) * delta;
      }
      advantages(b, t) = advantage;
      returns(b, t) = advantage + values(b, t);
    }
  }
  write_advantages(masked_whiten(advantages, op.mask, MeanShift::remove), returns, out);
}

// Unrolled REINFORCE++ return: G_t = r_t + γ·r_{t+1} + γ²·r_{t+2} + ..., stopping before the first
// masked position after t (t itself may be masked).
void compute_reinforce_plus_plus_advantages_loop(const AdvantageInputs& in, const AdvantageConfig& config,
                                                 const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  Matrix returns(B, T, op.rewards.dtype);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      double discounted = op.rewards(b, t), discount = 1.0;
      for (int64_t u = t + 1; u < T && op.mask(b, u) != 0.0; ++u) {
        discount *= config.gamma;
        discounted += discount * op.rewards(b, u);
      }
      returns(b, t) = discounted;
    }
  }
  Matrix advantages = masked_whiten(returns, op.mask, MeanShift::remove);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) advantages(b, t) *= op.mask(b, t);
  write_advantages(advantages, returns, out);
}

// returns_t = Σ_{u >= t} r_u·m_u, summed afresh for every t.
void compute_remax_advantages_loop(const AdvantageInputs& in, const AdvantageConfig&, const AdvantageOutputs& out) {
  const TokenOperands op = read_token_operands(in);
  const std::vector<double> baseline_B = read_reward_baselines(in, op.rewards);
  const int64_t B = op.rewards.rows, T = op.rewards.cols;
  Matrix returns(B, T, op.rewards.dtype), advantages(B, T, op.rewards.dtype);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t u = t; u < T; ++u) returns(b, t) += op.rewards(b, u) * op.mask(b, u);
      advantages(b, t) = returns(b, t) - (op.mask(b, t) != 0.0 ? baseline_B[size_t(b)] : 0.0);
    }
  }
  write_advantages(advantages, returns, out);
}

}  // namespace rf::rl
