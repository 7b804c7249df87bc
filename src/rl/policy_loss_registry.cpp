#include <array>

#include "rl/named_choice.h"
#include "rl/policy_loss.h"

namespace rf::rl {
namespace {

constexpr std::array<PolicyLoss, 7> kPolicyLosses{{
    {"vanilla", "verl.trainer.ppo.core_algos.compute_policy_loss_vanilla", policy_loss_vanilla},
    {"gspo", "verl.trainer.ppo.core_algos.compute_policy_loss_gspo", policy_loss_gspo},
    {"gpg", "verl.trainer.ppo.core_algos.compute_policy_loss_gpg", policy_loss_gpg},
    {"cispo", "verl.trainer.ppo.core_algos.compute_policy_loss_cispo", policy_loss_cispo},
    {"sapo", "verl.trainer.ppo.core_algos.compute_policy_loss_sapo", policy_loss_sapo},
    {"geo_mean", "verl.trainer.ppo.core_algos.compute_policy_loss_geo_mean", policy_loss_geo_mean},
    {"kl_cov", "verl.trainer.ppo.core_algos.compute_policy_loss_kl_cov", policy_loss_kl_cov},
}};

}  // namespace

std::span<const PolicyLoss> policy_losses() { return kPolicyLosses; }

const PolicyLoss& find_policy_loss(std::string_view loss_mode) {
  return find_named(policy_losses(), loss_mode, "policy_loss.loss_mode");
}

}  // namespace rf::rl
