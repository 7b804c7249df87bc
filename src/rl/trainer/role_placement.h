// Where the RL roles run (DESIGN §5: "roles are placed by device_mapping (ROLL) or share all ranks"). Each
// role's `device_mapping` (rlforge's key under actor_rollout_ref.{actor,rollout,ref}, ROLL's name and forms)
// lists the world ranks it runs on, in the forms roll_device_mapping.h reads (a YAML list of ranks or ROLL's
// string `list(range(a, b[, step]))`); null puts the role on every rank (verl's hybrid engine), and the
// reference, the critic (critic.device_mapping) and the reward model (reward_model.device_mapping) follow
// the actor by default.
// Checked before any work: ranks inside the world, no repeats, every placed role's TP size dividing its
// rank count, every rank with a role; an error names the key.
#pragma once

#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

#include "rl/trainer/rl_config.h"

namespace rf::rl {

// The world ranks of each role, ascending; empty: every rank.
struct RolePlacement {
  std::vector<int> actor, rollout, ref, critic, reward_model;
};

RolePlacement role_placement(const RlConfig& config, int world_size);

}  // namespace rf::rl
