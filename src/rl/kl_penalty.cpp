#include "rl/kl_penalty.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "rl/matrix.h"
#include "rl/named_choice.h"
#include "rl/subgradients.h"

namespace rf::rl {
namespace {

struct KlEstimate {
  double value = 0;
  double dvalue = 0;  // d value/d logprob
};

KlEstimate kl_estimate(double logprob, double ref_logprob, KlPenalty penalty) {
  const double d = logprob - ref_logprob;
  switch (penalty) {
    case KlPenalty::k1:
      return {d, 1.0};
    case KlPenalty::abs:
      return {std::abs(d), sign(d)};
    case KlPenalty::k2:
      return {0.5 * d * d, d};
    case KlPenalty::k3: {
      // Both clamps are verl's, for numerical stability: e^k overflows f32 past k = 88.
      const double k_raw = ref_logprob - logprob;
      const double k = std::clamp(k_raw, -20.0, 20.0);
      const double v = std::exp(k) - k - 1.0;
      // dk/dlogprob = -1 where the inner clamp passes.
      return {std::clamp(v, -10.0, 10.0),
              -(std::exp(k) - 1.0) * clamp_grad(k_raw, -20.0, 20.0) * clamp_grad(v, -10.0, 10.0)};
    }
  }
  return {};
}

}  // namespace

KlPenalty parse_kl_penalty(std::string_view name) {
  if (!name.empty() && name.back() == '+')
    throw ConfigError("kl_penalty", fmt::format("'{}': the straight-through '+' estimators are not supported "
                                                "(verl b178a3c raises NotImplementedError for them too)",
                                                name));
  return find_enum_name<KlPenalty>(name, "kl_penalty");
}

std::string_view kl_penalty_name(KlPenalty penalty) { return enum_name(penalty); }

void kl_penalty(TensorView logprob_BT, TensorView ref_logprob_BT, KlPenalty penalty, TensorView kl_BT,
                TensorView dkl_BT) {
  const Matrix logprob = read_matrix(logprob_BT, "logprob_BT");
  const Matrix ref_logprob = read_matrix(ref_logprob_BT, "ref_logprob_BT");
  check_same_shape(logprob, "logprob_BT", ref_logprob, "ref_logprob_BT");
  Matrix kl(logprob.rows, logprob.cols, logprob.dtype), dkl(kl);
  for (size_t i = 0; i < kl.values.size(); ++i) {
    const KlEstimate estimate = kl_estimate(logprob.values[i], ref_logprob.values[i], penalty);
    kl.values[i] = estimate.value;
    dkl.values[i] = estimate.dvalue;
  }
  write_matrix(kl, kl_BT, "kl_BT");
  if (!dkl_BT.empty()) write_matrix(dkl, dkl_BT, "dkl_BT");
}

void compute_rewards(TensorView token_level_scores_BT, TensorView old_log_prob_BT, TensorView ref_log_prob_BT,
                     double kl_ratio, TensorView rewards_BT) {
  Matrix rewards = read_matrix(token_level_scores_BT, "token_level_scores_BT");
  const Matrix old_log_prob = read_matrix(old_log_prob_BT, "old_log_prob_BT");
  const Matrix ref_log_prob = read_matrix(ref_log_prob_BT, "ref_log_prob_BT");
  check_same_shape(rewards, "token_level_scores_BT", old_log_prob, "old_log_prob_BT");
  check_same_shape(rewards, "token_level_scores_BT", ref_log_prob, "ref_log_prob_BT");
  for (size_t i = 0; i < rewards.values.size(); ++i)
    rewards.values[i] -= (old_log_prob.values[i] - ref_log_prob.values[i]) * kl_ratio;
  write_matrix(rewards, rewards_BT, "rewards_BT");
}

}  // namespace rf::rl
