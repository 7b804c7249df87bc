#include <array>

#include "rl/advantage_estimator.h"
#include "rl/named_choice.h"

namespace rf::rl {
namespace {

constexpr std::array<AdvantageEstimator, 11> kAdvantageEstimators{{
    {"gae", "verl.trainer.ppo.core_algos.compute_gae_advantage_return", compute_gae_advantages,
     compute_gae_advantages_loop},
    {"grpo", "verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage", compute_grpo_advantages,
     compute_grpo_advantages_loop},
    {"grpo_vectorized", "verl.trainer.ppo.core_algos.compute_grpo_vectorized_outcome_advantage",
     compute_grpo_vectorized_advantages, compute_grpo_vectorized_advantages_loop},
    {"grpo_passk", "verl.trainer.ppo.core_algos.compute_grpo_passk_outcome_advantage", compute_grpo_passk_advantages,
     compute_grpo_passk_advantages_loop},
    {"rloo", "verl.trainer.ppo.core_algos.compute_rloo_outcome_advantage", compute_rloo_advantages,
     compute_rloo_advantages_loop},
    {"rloo_vectorized", "verl.trainer.ppo.core_algos.compute_rloo_vectorized_outcome_advantage",
     compute_rloo_vectorized_advantages, compute_rloo_vectorized_advantages_loop},
    {"opo", "verl.trainer.ppo.core_algos.compute_opo_outcome_advantage", compute_opo_advantages,
     compute_opo_advantages_loop},
    {"gpg", "verl.trainer.ppo.core_algos.compute_gpg_outcome_advantage", compute_gpg_advantages,
     compute_gpg_advantages_loop},
    {"reinforce_plus_plus", "verl.trainer.ppo.core_algos.compute_reinforce_plus_plus_outcome_advantage",
     compute_reinforce_plus_plus_advantages, compute_reinforce_plus_plus_advantages_loop},
    {"reinforce_plus_plus_baseline",
     "verl.trainer.ppo.core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage",
     compute_reinforce_plus_plus_baseline_advantages, compute_reinforce_plus_plus_baseline_advantages_loop},
    {"remax", "verl.trainer.ppo.core_algos.compute_remax_outcome_advantage", compute_remax_advantages,
     compute_remax_advantages_loop},
}};

}  // namespace

std::span<const AdvantageEstimator> advantage_estimators() { return kAdvantageEstimators; }

const AdvantageEstimator& find_advantage_estimator(std::string_view name) {
  return find_named(advantage_estimators(), name, "adv_estimator");
}

}  // namespace rf::rl
