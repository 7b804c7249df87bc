#include "rl/advantage_operands.h"

namespace rf::rl {

TokenOperands read_token_operands(const AdvantageInputs& in) {
  TokenOperands operands{read_matrix(in.token_level_rewards_BT, "token_level_rewards_BT"),
                         read_mask(in.response_mask_BT, "response_mask_BT")};
  check_same_shape(operands.rewards, "token_level_rewards_BT", operands.mask, "response_mask_BT");
  return operands;
}

OutcomeOperands read_outcome_operands(const AdvantageInputs& in, std::string_view estimator) {
  TokenOperands token = read_token_operands(in);
  OutcomeOperands operands{std::move(token.rewards), std::move(token.mask), {}, in.index};
  const Matrix& rewards = operands.rewards;
  RF_CHECK(in.index != nullptr, "{}: needs the group index (uid) of each sample", estimator);
  RF_CHECK(in.index->size() == rewards.rows, "{}: index: expected {} labels (one per sample), got {}", estimator,
           rewards.rows, in.index->size());
  operands.scores_B.assign(size_t(rewards.rows), 0.0);
  for (int64_t b = 0; b < rewards.rows; ++b) {
    double score = 0;
    for (int64_t t = 0; t < rewards.cols; ++t) score += rewards(b, t);
    operands.scores_B[size_t(b)] = round_to(rewards.dtype, score);
  }
  return operands;
}

Matrix read_values(const AdvantageInputs& in, const Matrix& rewards) {
  Matrix values = read_matrix(in.values_BT, "values_BT");
  check_same_shape(rewards, "token_level_rewards_BT", values, "values_BT");
  return values;
}

std::vector<double> read_reward_baselines(const AdvantageInputs& in, const Matrix& rewards) {
  return read_vector(in.reward_baselines_B, rewards.rows, "reward_baselines_B");
}

double grpo_normalized(double centred, double std, const AdvantageConfig& config) {
  return config.norm_adv_by_std_in_grpo ? centred / (std + config.epsilon) : centred;
}

void write_advantages(const Matrix& advantages, const Matrix& returns, const AdvantageOutputs& out) {
  write_matrix(advantages, out.advantages_BT, "advantages_BT");
  write_matrix(returns, out.returns_BT, "returns_BT");
}

void write_outcome_advantages(const std::vector<double>& adv_B, const Matrix& mask, const AdvantageOutputs& out) {
  Matrix advantages(mask.rows, mask.cols, DType::f64);
  for (int64_t b = 0; b < mask.rows; ++b)
    for (int64_t t = 0; t < mask.cols; ++t) advantages(b, t) = adv_B[size_t(b)] * mask(b, t);
  write_advantages(advantages, advantages, out);
}

}  // namespace rf::rl
