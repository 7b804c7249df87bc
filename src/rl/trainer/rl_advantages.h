// The step's `adv` stage (spec verl.md §2.3 step 12, §1.5, §1.6): token-level scores (the score at each
// response's last token), the KL penalty in the reward when algorithm.use_kl_in_reward (with the KL
// controller's coefficient, updated by the batch's KL), then the advantage estimator over the uid
// groups (gae over the critic's values instead). Runs on the whole batch, as verl's driver does.
#pragma once

#include <map>
#include <string>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_config.h"
#include "rl/kl_controller.h"

namespace rf::rl {

// Fills token_level_rewards, advantages and returns of every response. `kl_controller` is read and
// updated only with use_kl_in_reward (then every response needs ref_log_prob and old_log_probs); gae
// reads every response's values, remax every response's reward_baseline.
// Returns actor/reward_kl_penalty and actor/reward_kl_penalty_coeff when the KL is in the reward.
std::map<std::string, double> compute_advantages(RlBatch& batch, const AlgorithmConfig& algorithm,
                                                 rl::KlController& kl_controller);

}  // namespace rf::rl
