// KL estimators between the policy's and the reference policy's log-probs of the sampled tokens
// (verl core_algos.kl_penalty; J. Schulman, "Approximating KL divergence", 2020), and the KL-in-reward
// shaping of token-level scores (compute_rewards). With d = logprob - ref_logprob:
//   kl | k1          d
//   abs              |d|
//   mse | k2         d²/2
//   low_var_kl | k3  k = clamp(-d, -20, 20); clamp(e^k - k - 1, -10, 10)
// No mask is applied. The derivatives by logprob, which the actor's KL loss needs, follow torch
// autograd on verl's code (subgradients.h): 1, sign(d) (0 at d = 0), d, and -(e^k - 1) for k3 where
// neither clamp holds its input, 0 where one does.
// Not here: the straight-through '+' variants (k3+, ...): at the verl commit we match (b178a3c)
// kl_penalty raises NotImplementedError for them, so parse_kl_penalty rejects them too; and "full"
// (needs whole-vocabulary log-probs; verl raises as well).
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include "core/tensor_view.h"

namespace rf::rl {

enum class KlPenalty : uint8_t { k1, abs, k2, k3 };

// verl's names (algorithm.kl_penalty, actor.kl_loss_type), each canonical name before its alias: how the
// config binds them.
constexpr std::array<std::pair<KlPenalty, std::string_view>, 7> enum_names(KlPenalty) {
  return {{{KlPenalty::k1, "kl"},
           {KlPenalty::k1, "k1"},
           {KlPenalty::abs, "abs"},
           {KlPenalty::k2, "mse"},
           {KlPenalty::k2, "k2"},
           {KlPenalty::k3, "low_var_kl"},
           {KlPenalty::k3, "k3"}}};
}
KlPenalty parse_kl_penalty(std::string_view name);
std::string_view kl_penalty_name(KlPenalty penalty);

// dkl_BT: empty, or where d kl/d logprob goes, elementwise.
void kl_penalty(TensorView logprob_BT, TensorView ref_logprob_BT, KlPenalty penalty, TensorView kl_BT,
                TensorView dkl_BT = {});

// rewards = scores - (old_log_prob - ref_log_prob)·kl_ratio, elementwise (verl's compute_rewards).
void compute_rewards(TensorView token_level_scores_BT, TensorView old_log_prob_BT, TensorView ref_log_prob_BT,
                     double kl_ratio, TensorView rewards_BT);

}  // namespace rf::rl
