// `rlforge train --config FILE [key=value ...]`: RL post-training (verl's main_ppo). The config is read
// as verl's would be (the file, rlforge's defaults under it, dotted overrides), verl's keys rlforge does
// not implement go through rl_config_policy.h, then it is bound into the typed RlConfig (unknown keys and
// bad values are errors naming the key; RlConfig::validate runs inside bind) and its layout is checked
// against the world, all before any work. `--check-config` stops there and prints the resolved config.
#include <cstdio>

#include "apps/rlforge/commands.h"
#include "apps/rlforge/rl_config_policy.h"
#include "apps/rlforge/rl_trainer.h"
#include "config/bind.h"
#include "config/config_tree.h"

namespace rf::apps {
namespace {

// verl's ref.megatron interpolates its parallel sizes, dtype, seed and offload from the actor's
// (${oc.select:actor_rollout_ref.actor.megatron...}): every ref.megatron key the user did not set, in
// the file or by an override, takes the actor's resolved value.
void ref_follows_actor(config::ConfigTree& tree, const YAML::Node& file_ref_megatron,
                       const std::vector<std::string>& overrides) {
  const std::string ref_prefix = "actor_rollout_ref.ref.megatron.";
  auto set_by_user = [&](const std::string& key) {
    if (file_ref_megatron.IsMap() && file_ref_megatron[key].IsDefined()) return true;
    for (const std::string& o : overrides) {
      const std::string assignment = o.substr(o.find_first_not_of('+'));
      if (assignment.starts_with(ref_prefix + key + "=")) return true;
    }
    return false;
  };
  const YAML::Node actor = tree.node("actor_rollout_ref.actor.megatron");
  YAML::Node ref = tree.node("actor_rollout_ref.ref.megatron");
  for (const auto& entry : actor) {
    const std::string key = entry.first.as<std::string>();
    if (!set_by_user(key)) ref[key] = YAML::Clone(entry.second);
  }
}

RlConfig load_rl_config(const std::string& config_path, const std::vector<std::string>& overrides) {
  config::ConfigTree tree = config::ConfigTree::from_file(config_path);
  const YAML::Node in_file = tree.node("actor_rollout_ref.ref.megatron");
  const YAML::Node file_ref_megatron = in_file.IsDefined() ? YAML::Clone(in_file) : YAML::Node();
  tree.merge_defaults(config::to_yaml(RlConfig{}));
  tree.apply_overrides(reach_unimplemented_verl_keys(overrides));
  apply_verl_key_policy(tree);
  ref_follows_actor(tree, file_ref_megatron, overrides);
  return config::bind<RlConfig>(tree.root(), "");
}

// Every role runs on all ranks (the hybrid engine), each TP group a slice of the world and DP the rest.
// Pipeline, context and expert sizes other than 1 were refused by EngineConfig::validate already.
void check_rl_layout(const RlConfig& config, int world_size) {
  const auto check_tp = [&](const std::string& key, int64_t tp) {
    if (world_size % tp != 0)
      throw ConfigError(key, fmt::format("{} does not divide the world size {}", tp, world_size));
  };
  const ActorRolloutRefSection& roles = config.actor_rollout_ref;
  check_tp("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", roles.actor.megatron.tensor_model_parallel_size);
  check_tp("actor_rollout_ref.ref.megatron.tensor_model_parallel_size", roles.ref.megatron.tensor_model_parallel_size);
  check_tp("actor_rollout_ref.rollout.tensor_model_parallel_size", roles.rollout.tensor_model_parallel_size);
  const int64_t num_dp_ranks = world_size / roles.actor.megatron.tensor_model_parallel_size;
  const int64_t responses = roles.actor.ppo_mini_batch_size * roles.rollout.n;
  if (responses % num_dp_ranks != 0)
    throw ConfigError("actor_rollout_ref.actor.ppo_mini_batch_size",
                      fmt::format("a mini-batch's {} responses (ppo_mini_batch_size {} x rollout.n {}) do not split "
                                  "over {} data-parallel ranks",
                                  responses, roles.actor.ppo_mini_batch_size, roles.rollout.n, num_dp_ranks));
}

}  // namespace

Command add_train_command(CLI::App& app, const dist::MpiRuntime& mpi) {
  auto* cmd = app.add_subcommand("train", "RL post-training (PPO / GRPO) with verl's config keys");
  auto config_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto check_only = std::make_shared<bool>(false);
  cmd->add_option("--config", *config_path, "YAML config in verl's keys (e.g. examples/grpo_arith.yaml)")->required();
  cmd->add_flag("--check-config", *check_only, "read and check the config, print it resolved, and exit");
  cmd->add_option("overrides", *overrides,
                  "dotted overrides: algorithm.adv_estimator=grpo, trainer.total_training_steps=50, +a.b=1");
  return [config_path, overrides, check_only, &mpi] {
    const RlConfig config = load_rl_config(*config_path, *overrides);
    const std::unique_ptr<dist::ProcessGroup> world = mpi.world();
    check_rl_layout(config, world->size());
    const std::string resolved_yaml = YAML::Dump(config::to_yaml(config));
    if (*check_only) {
      if (world->rank() == 0) std::printf("%s\n", resolved_yaml.c_str());
      return 0;
    }
    run_rl(config, resolved_yaml, *world);
    return 0;
  };
}

}  // namespace rf::apps
