// `rlforge train`'s layout, checked whole from the config and the models' config.json files before any work
// (train_command.cpp runs it on every rank, `--check-config` included): each role on its ranks
// (role_placement.h: all of them by default, the hybrid engine), each TP x PP model-parallel group a slice of
// them and DP the rest; mini-batches splitting over DP; each megatron role's layer split against its model's
// layers; an interleaved pipeline's schedule against the micro-batches of an update where the config fixes
// their count. Every rank reaches the same verdict alone, so a wrong layout is one error on all of them.
// Not here: what needs no ranks and no model (RlConfig::validate, EngineConfig::validate at read time), the
// forward passes' micro-batch counts (they follow from each rank's share of the batch; a count the
// interleaved schedule cannot take stops the pass that has it, naming the count).
#pragma once

#include <string>
#include <vector>

#include "model/pipeline_split.h"
#include "rl/trainer/rl_config.h"

namespace rf::rl {

// ConfigError keyed by the full key (actor_rollout_ref.actor.megatron.noop_layers: ... in <dir>/config.json).
void check_rl_layout(const RlConfig& config, int world_size);

// A role the run builds on a megatron engine: the actor, the reference when a KL term reads it, the critic
// when it runs, the reward model when enabled.
struct MegatronRole {
  std::string name;        // actor, ref, critic, reward_model
  std::string key_prefix;  // where its block is: "actor_rollout_ref.actor.megatron."
  const engine::EngineConfig* megatron = nullptr;
  std::string model_dir;   // the HF folder whose config.json gives its layers ("" when the config names none)
  bool trains = false;     // has an update pass (actor, critic)
};
std::vector<MegatronRole> megatron_roles(const RlConfig& config);

// The role's layers over its pipeline: ConfigError keyed `key_prefix` + the block's key, naming the model.
model::PipelineSplit pipeline_split(const MegatronRole& role);

}  // namespace rf::rl
