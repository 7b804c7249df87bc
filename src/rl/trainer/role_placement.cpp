#include "rl/trainer/role_placement.h"

#include <algorithm>

#include "rl/trainer/roll_device_mapping.h"
#include "core/error.h"

namespace rf::rl {
namespace {

std::vector<int> ranks_of(const YAML::Node& node, const std::string& key) {
  if (!node.IsDefined() || node.IsNull()) return {};
  const std::vector<int64_t> ranks = parse_device_mapping(node, key);
  if (ranks.empty()) throw ConfigError(key, "names no rank (null puts the role on every rank)");
  return {ranks.begin(), ranks.end()};
}

}  // namespace

RolePlacement role_placement(const RlConfig& config, int world_size) {
  const ActorRolloutRefSection& roles = config.actor_rollout_ref;
  const std::string prefix = "actor_rollout_ref.";
  RolePlacement p;
  p.actor = ranks_of(roles.actor.device_mapping, prefix + "actor.device_mapping");
  p.rollout = ranks_of(roles.rollout.device_mapping, prefix + "rollout.device_mapping");
  p.ref = ranks_of(roles.ref.device_mapping, prefix + "ref.device_mapping");
  if (p.ref.empty()) p.ref = p.actor;
  p.critic = ranks_of(config.critic.device_mapping, "critic.device_mapping");
  if (p.critic.empty()) p.critic = p.actor;
  p.reward_model = ranks_of(config.reward_model.device_mapping, "reward_model.device_mapping");
  if (p.reward_model.empty()) p.reward_model = p.actor;
  std::vector<bool> has_role(size_t(world_size), false);
  auto check = [&](const std::vector<int>& ranks, const std::string& key, int64_t tp) {
    for (const int r : ranks)
      if (r >= world_size)
        throw ConfigError(key, fmt::format("rank {} is outside the world of {} ranks", r, world_size));
    // (On every rank, the TP size must divide the world: rl_layout.h's check_rl_layout says so.)
    if (!ranks.empty() && int64_t(ranks.size()) % tp != 0)
      throw ConfigError(key, fmt::format("{} ranks cannot hold TP groups of {} (the role's tensor_model_parallel_size)",
                                         ranks.size(), tp));
    for (int r = 0; r < world_size; ++r)
      if (ranks.empty() || std::binary_search(ranks.begin(), ranks.end(), r)) has_role[size_t(r)] = true;
  };
  check(p.actor, prefix + "actor.device_mapping", roles.actor.megatron.tensor_model_parallel_size);
  check(p.rollout, prefix + "rollout.device_mapping", roles.rollout.tensor_model_parallel_size);
  check(p.ref, prefix + "ref.device_mapping", roles.ref.megatron.tensor_model_parallel_size);
  if (config.uses_critic())
    check(p.critic, "critic.device_mapping", config.critic.megatron.tensor_model_parallel_size);
  if (config.reward_model.enable)
    check(p.reward_model, "reward_model.device_mapping", config.reward_model.megatron.tensor_model_parallel_size);
  for (int r = 0; r < world_size; ++r)
    if (!has_role[size_t(r)])
      throw ConfigError(prefix + "actor.device_mapping",
                        fmt::format("rank {} of the {} has no role: place every rank (actor, rollout, ref, critic or reward_model)", r,
                                    world_size));
  return p;
}

}  // namespace rf::rl
