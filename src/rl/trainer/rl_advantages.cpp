#include "rl/trainer/rl_advantages.h"

#include <vector>

#include "rl/advantage_estimator.h"
#include "rl/kl_penalty.h"
#include "rl/masked_stats.h"

namespace rf::rl {

std::map<std::string, double> compute_advantages(RlBatch& batch, const AlgorithmConfig& algorithm,
                                                 rl::KlController& kl_controller) {
  std::map<std::string, double> metrics;
  const int64_t B = int64_t(batch.size());
  // verl's reward manager writes the score at the last valid response token.
  for (RlResponse& r : batch) {
    r.token_level_rewards.assign(r.response.size(), 0.0f);
    r.token_level_rewards.back() = float(r.score);
  }
  const Tensor mask_BT = response_mask_matrix(batch);
  Tensor rewards_BT = column_matrix(batch, &RlResponse::token_level_rewards);
  if (algorithm.use_kl_in_reward) {
    // verl's apply_kl_penalty: kld = kl_penalty(old, ref) * mask; rewards = scores - beta * kld; the
    // controller sees the batch mean of the per-response masked means.
    const Tensor old_BT = column_matrix(batch, &RlResponse::old_log_probs);
    const Tensor ref_BT = column_matrix(batch, &RlResponse::ref_log_prob);
    Tensor kl_BT(mask_BT.shape(), DType::f32);
    rl::kl_penalty(old_BT, ref_BT, algorithm.kl_penalty, kl_BT);
    const double beta = kl_controller.value();
    const int64_t T = mask_BT.size(1);
    double current_kl = 0;
    for (int64_t b = 0; b < B; ++b) {
      double row_sum = 0, row_count = 0;
      for (int64_t t = 0; t < T; ++t) {
        const float m = mask_BT.data<float>()[b * T + t];
        const float kld = kl_BT.data<float>()[b * T + t] * m;
        rewards_BT.data<float>()[b * T + t] -= float(beta) * kld;
        row_sum += kld;
        row_count += m;
      }
      current_kl += row_sum / (row_count + 1e-8);
    }
    current_kl /= double(B);
    kl_controller.update(current_kl, B);
    metrics["actor/reward_kl_penalty"] = current_kl;
    metrics["actor/reward_kl_penalty_coeff"] = beta;
  }
  store_column(batch, rewards_BT, &RlResponse::token_level_rewards);

  std::vector<int64_t> groups(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) groups[size_t(b)] = batch[size_t(b)].group;
  const rl::GroupIndex index(groups);
  const rl::AdvantageEstimator& estimator = rl::find_advantage_estimator(algorithm.adv_estimator);
  Tensor advantages_BT(mask_BT.shape(), DType::f32), returns_BT(mask_BT.shape(), DType::f32);
  // The critic's values (gae): filled by the values stage when the run has a critic, else empty.
  const bool with_values = !batch.empty() && !batch.front().values.empty();
  const Tensor values_BT = with_values ? column_matrix(batch, &RlResponse::values) : Tensor();
  // ReMax: each response's baseline, its prompt's greedy score (filled by the trainer's gen_max stage).
  Tensor baselines_B;
  if (algorithm.adv_estimator == "remax") {
    baselines_B = Tensor({B}, DType::f32);
    for (int64_t b = 0; b < B; ++b) baselines_B.data<float>()[b] = float(batch[size_t(b)].reward_baseline);
  }
  rl::AdvantageInputs inputs;
  inputs.token_level_rewards_BT = rewards_BT;
  inputs.response_mask_BT = mask_BT;
  inputs.values_BT = values_BT;
  inputs.reward_baselines_B = baselines_B;
  inputs.index = &index;
  rl::AdvantageConfig config;
  config.gamma = algorithm.gamma;
  config.lam = algorithm.lam;
  config.norm_adv_by_std_in_grpo = algorithm.norm_adv_by_std_in_grpo;
  estimator.compute(inputs, config, {advantages_BT, returns_BT});
  store_column(batch, advantages_BT, &RlResponse::advantages);
  store_column(batch, returns_BT, &RlResponse::returns);
  return metrics;
}

}  // namespace rf::rl
