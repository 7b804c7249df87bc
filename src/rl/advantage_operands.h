// What the advantage estimators and their loop twins share: the checked operands read from
// AdvantageInputs, and writing results into AdvantageOutputs. Internal to src/rl.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <string_view>
#include <vector>

#include "rl/advantage_estimator.h"
#include "rl/matrix.h"

namespace rf::rl {

struct TokenOperands {
  Matrix rewards;  // (B, T)
  Matrix mask;     // (B, T)
};

struct OutcomeOperands {
  Matrix rewards;  // (B, T)
  Matrix mask;     // (B, T)
  // Σ_t rewards over all T positions, rounded to the rewards' dtype: verl's scores are a tensor of
  // that dtype, and the rounding keeps its exact zeros and ties (gpg counts non-zero scores,
  // grpo_passk takes the difference of the two best).
  std::vector<double> scores_B;
  const GroupIndex* index = nullptr;  // checked: present and of size B
};

TokenOperands read_token_operands(const AdvantageInputs& in);
OutcomeOperands read_outcome_operands(const AdvantageInputs& in, std::string_view estimator);
// (B, T) values of the critic (gae) or per-sample baselines (remax), checked against the rewards.
Matrix read_values(const AdvantageInputs& in, const Matrix& rewards);
std::vector<double> read_reward_baselines(const AdvantageInputs& in, const Matrix& rewards);

// GRPO's normalisation of a centred score: divided by σ + ε, or left as it is (Dr.GRPO) when
// norm_adv_by_std_in_grpo is off. grpo, grpo_vectorized and grpo_passk share it.
double grpo_normalized(double centred, double std, const AdvantageConfig& config);

void write_advantages(const Matrix& advantages, const Matrix& returns, const AdvantageOutputs& out);
// Outcome estimators: advantages = returns = adv_B[b]·mask[b, t].
void write_outcome_advantages(const std::vector<double>& adv_B, const Matrix& mask, const AdvantageOutputs& out);

}  // namespace rf::rl
