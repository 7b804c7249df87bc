// `rlforge train --config FILE [key=value ...]`: RL post-training (verl's main_ppo). The config is read
// as verl's would be (the file, rlforge's defaults under it, dotted overrides), the pipeline and recompute keys verl spells
// under override_transformer_config move into the megatron blocks (transformer_config_keys.h), verl's keys
// rlforge does not implement go through rl_config_policy.h, then it is bound into the typed RlConfig (unknown keys and
// bad values are errors naming the key; RlConfig::validate runs inside bind) and its layout is checked
// against the world, all before any work. `--check-config` stops there and prints the resolved config.
#include <cstdio>

#include "apps/rlforge/commands.h"
#include "apps/rlforge/rl_config_policy.h"
#include "rl/trainer/rl_trainer.h"
#include "rl/trainer/rl_layout.h"
#include "apps/rlforge/roll_config.h"
#include "apps/rlforge/transformer_config_keys.h"
#include "config/bind.h"
#include "config/config_tree.h"
#include "config/yaml_util.h"
#include "engine/pipeline_dump.h"

namespace rf::apps {
namespace {

// verl's ref.megatron and critic.megatron interpolate their parallel sizes, dtype, seed and offload from
// the actor's (${oc.select:actor_rollout_ref.actor.megatron...}), and rlforge's reward_model.megatron does
// the same: every key of the role's megatron block (`role`: actor_rollout_ref.ref, critic or
// reward_model) the user did not set, in the file (`in_file`, the block as the
// file wrote it) or by an override, takes the actor's resolved value.
void megatron_follows_actor(config::ConfigTree& tree, const std::string& role, const YAML::Node& in_file,
                            const std::vector<std::string>& overrides) {
  const std::string prefix = role + ".megatron.";
  auto set_by_user = [&](const std::string& key) {
    if (in_file.IsMap() && in_file[key].IsDefined()) return true;
    for (const std::string& o : overrides) {
      const std::string assignment = o.substr(o.find_first_not_of('+'));
      if (assignment.starts_with(prefix + key + "=")) return true;
    }
    return false;
  };
  const YAML::Node actor = tree.node("actor_rollout_ref.actor.megatron");
  YAML::Node follower = tree.node(role + ".megatron");
  for (const auto& entry : actor) {
    const std::string key = entry.first.as<std::string>();
    if (!set_by_user(key)) follower[key] = YAML::Clone(entry.second);
  }
  // Sequence parallelism splits the sequence over TP: a role on TP 1 that inherits the actor's `true` runs
  // without it, as Megatron's validate_args turns it off at TP 1 (a user's own `true` at TP 1 is refused).
  int64_t tp = 0;
  if (!set_by_user("sequence_parallel") &&
      YAML::convert<int64_t>::decode(config::find_child(follower, "tensor_model_parallel_size"), tp) && tp == 1)
    follower["sequence_parallel"] = false;
}

// A role's megatron block as the file wrote it (null when absent), before rlforge's defaults fill it.
YAML::Node megatron_in_file(const config::ConfigTree& tree, const std::string& role) {
  const YAML::Node in_file = tree.node(role + ".megatron");
  return in_file.IsDefined() ? YAML::Clone(in_file) : YAML::Node();
}

rl::RlConfig load_rl_config(const std::string& config_path, const std::vector<std::string>& given_overrides) {
  config::ConfigTree tree = config::ConfigTree::from_file(config_path);
  // A ROLL-style file becomes verl's key tree here (roll_config.h); from this line on it is a verl config.
  if (is_roll_config(tree.root()))
    tree = config::ConfigTree::from_string(YAML::Dump(translate_roll_config(tree.root(), config_path).verl_tree),
                                           config_path);
  // verl's override_transformer_config spellings of the pipeline and recompute keys, before the blocks take defaults.
  move_transformer_config_keys(tree);
  const std::vector<std::string> overrides = move_transformer_config_overrides(given_overrides);
  const YAML::Node ref_in_file = megatron_in_file(tree, "actor_rollout_ref.ref");
  const YAML::Node critic_in_file = megatron_in_file(tree, "critic");
  const YAML::Node reward_model_in_file = megatron_in_file(tree, "reward_model");
  const rl::RlConfig defaults;
  tree.merge_defaults(config::to_yaml(defaults));
  tree.apply_overrides(reach_unimplemented_verl_keys(overrides));
  apply_verl_key_policy(tree);
  megatron_follows_actor(tree, "actor_rollout_ref.ref", ref_in_file, overrides);
  megatron_follows_actor(tree, "critic", critic_in_file, overrides);
  megatron_follows_actor(tree, "reward_model", reward_model_in_file, overrides);
  return config::bind<rl::RlConfig>(tree.root(), "");
}

// `--dump-schedule M`: each training role's pipeline (the actor's, the critic's) for M micro-batches per DP rank.
// Every rank builds the tables (a wrong split is the same error on each); world rank 0 prints them.
void dump_rl_schedules(const rl::RlConfig& config, int64_t num_microbatches, bool print) {
  if (!config.actor_rollout_ref.model.path)
    throw ConfigError("actor_rollout_ref.model.path", "--dump-schedule reads the model's layer count from its folder");
  for (const rl::MegatronRole& role : rl::megatron_roles(config)) {
    if (!role.trains) continue;
    const std::string table =
        engine::dump_pipeline_schedule(*role.megatron, rl::pipeline_split(role), num_microbatches, role.key_prefix);
    const std::string block = role.key_prefix.substr(0, role.key_prefix.size() - 1);  // without the last dot
    if (print) std::printf("%s (%s):\n%s\n", role.name.c_str(), block.c_str(), table.c_str());
  }
}

}  // namespace

Command add_train_command(CLI::App& app, const dist::MpiRuntime& mpi) {
  auto* cmd = app.add_subcommand("train", "RL post-training (PPO / GRPO) with verl's config keys");
  auto config_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto check_only = std::make_shared<bool>(false);
  auto dump_schedule = std::make_shared<int64_t>(0);
  cmd->add_option("--config", *config_path, "YAML config in verl's keys (e.g. examples/grpo_arith.yaml)")->required();
  cmd->add_flag("--check-config", *check_only, "read and check the config, print it resolved, and exit");
  cmd->add_option("--dump-schedule", *dump_schedule,
                  "print the actor's (and critic's) pipeline split and schedule table for M micro-batches per DP "
                  "rank, and exit")
      ->check(CLI::PositiveNumber);
  cmd->add_option("overrides", *overrides,
                  "dotted overrides: algorithm.adv_estimator=grpo, trainer.total_training_steps=50, +a.b=1");
  return [config_path, overrides, check_only, dump_schedule, &mpi] {
    const rl::RlConfig config = load_rl_config(*config_path, *overrides);
    const std::unique_ptr<dist::ProcessGroup> world = mpi.world();
    // The schedules of the config's pipelines, whatever world runs this: no ranks are needed to print them.
    if (*dump_schedule > 0) {
      dump_rl_schedules(config, *dump_schedule, world->rank() == 0);
      return 0;
    }
    rl::check_rl_layout(config, world->size());
    const std::string resolved_yaml = YAML::Dump(config::to_yaml(config));
    if (*check_only) {
      if (world->rank() == 0) std::printf("%s\n", resolved_yaml.c_str());
      return 0;
    }
    rl::RlTrainer(config, resolved_yaml, *world).fit();
    return 0;
  };
}

}  // namespace rf::apps
