#include "rl/trainer/rl_layout.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "engine/pipeline_stage.h"
#include "model/model_config.h"
#include "model/param_layout.h"
#include "rl/trainer/role_placement.h"

namespace rf::rl {
namespace {

// A role's mini-batch of `mini_batch_size` prompts x `n` responses is split evenly over its DP ranks.
void check_mini_batch_split(const std::string& key, int64_t mini_batch_size, int64_t n, int64_t num_dp_ranks) {
  const int64_t responses = mini_batch_size * n;
  if (responses % num_dp_ranks != 0)
    throw ConfigError(key, fmt::format("a mini-batch's {} responses (ppo_mini_batch_size {} x rollout.n {}) do not "
                                       "split over {} data-parallel ranks",
                                       responses, mini_batch_size, n, num_dp_ranks));
}

// How a training role's update cuts a mini-batch (rl_roles.cpp's role_batching): each DP rank's share in
// micro-batches of `micro` responses (null: the share in one), or by tokens with use_dynamic_bsz.
struct UpdateCut {
  std::string section;  // critic or actor_rollout_ref.actor: where the keys below are
  int64_t mini_batch_size = 0;
  std::optional<int64_t> micro;
  bool dynamic = false;
};

UpdateCut update_cut(const RlConfig& config, const MegatronRole& role) {
  if (role.name == "critic")
    return {"critic", config.critic_ppo_mini_batch_size(), config.critic.ppo_micro_batch_size_per_gpu,
            config.critic_use_dynamic_bsz()};
  const ActorSection& actor = config.actor_rollout_ref.actor;
  return {"actor_rollout_ref.actor", actor.ppo_mini_batch_size, actor.ppo_micro_batch_size_per_gpu, actor.use_dynamic_bsz};
}

// An interleaved schedule takes only some micro-batch counts (ScheduleShape::validate). An update cut by count
// has the same count in every mini-batch, known here, so a config the engine would refuse at the first update
// is refused before the run.
void check_update_schedule(const RlConfig& config, const MegatronRole& role, const model::PipelineSplit& split,
                           int64_t num_dp_ranks) {
  const UpdateCut cut = update_cut(config, role);
  if (cut.dynamic) return;  // the data decides the count
  const int64_t n = config.actor_rollout_ref.rollout.sampling.n;
  const int64_t share = cut.mini_batch_size * n / num_dp_ranks;
  const int64_t micro = cut.micro.value_or(share);
  const int64_t num_microbatches = (share + micro - 1) / micro;
  try {
    role.megatron->schedule_shape(split, num_microbatches).validate();
  } catch (const ConfigError& e) {
    throw ConfigError(role.key_prefix + e.key_path(),
                      fmt::format("{}; an update has {} micro-batches per data-parallel rank ({}.ppo_mini_batch_size "
                                  "{} x rollout.n {} responses over {} data-parallel ranks, "
                                  "{}.ppo_micro_batch_size_per_gpu {})",
                                  e.detail(), num_microbatches, cut.section, cut.mini_batch_size, n, num_dp_ranks,
                                  cut.section, cut.micro ? fmt::format("{}", *cut.micro) : "null: the share in one"));
  }
}

// The role's parallel sizes against its model, before any work: TP's even splits, CP's heads, EP's experts, and
// sequence parallel for a trained MoE model at TP > 1. A model folder without a config.json is the run's to refuse.
void check_model_layout(const MegatronRole& role) {
  const std::filesystem::path config_json = std::filesystem::path(role.model_dir) / "config.json";
  if (!std::filesystem::exists(config_json)) return;
  const model::ModelConfig model_config = model::ModelConfig::from_file(config_json.string());
  try {
    model::check_tp_divides(model_config, role.megatron->tp_shard(0));
    engine::check_context_parallel(*role.megatron, model_config);
    engine::check_expert_parallel(*role.megatron, model_config);
    if (role.trains) engine::check_moe_training(*role.megatron, model_config);
  } catch (const ConfigError& e) {
    throw ConfigError(role.key_prefix + e.key_path(), fmt::format("{} in {}", e.detail(), config_json.string()));
  }
}

}  // namespace

std::vector<MegatronRole> megatron_roles(const RlConfig& config) {
  const ActorRolloutRefSection& roles = config.actor_rollout_ref;
  const std::string policy = roles.model.path.value_or("");
  std::vector<MegatronRole> out = {{"actor", "actor_rollout_ref.actor.megatron.", &roles.actor.megatron, policy, true}};
  if (config.uses_reference())
    out.push_back({"ref", "actor_rollout_ref.ref.megatron.", &roles.ref.megatron, policy, false});
  if (config.uses_critic())
    out.push_back({"critic", "critic.megatron.", &config.critic.megatron, config.critic_model_path(), true});
  if (config.reward_model.enable)
    out.push_back({"reward_model", "reward_model.megatron.", &config.reward_model.megatron,
                   config.reward_model.model.path.value_or(""), false});
  return out;
}

model::PipelineSplit pipeline_split(const MegatronRole& role) {
  const std::string config_json = (std::filesystem::path(role.model_dir) / "config.json").string();
  const int64_t num_hidden_layers = model::ModelConfig::from_file(config_json).num_hidden_layers;
  try {
    return role.megatron->pipeline_layout(num_hidden_layers);
  } catch (const ConfigError& e) {
    throw ConfigError(role.key_prefix + e.key_path(), fmt::format("{} in {}", e.detail(), config_json));
  }
}

void check_rl_layout(const RlConfig& config, int world_size) {
  const RolePlacement placement = role_placement(config, world_size);
  const auto check_tp = [&](const std::string& key, int64_t tp, const std::vector<int>& ranks) {
    if (ranks.empty() && world_size % tp != 0)
      throw ConfigError(key, fmt::format("{} does not divide the world size {}", tp, world_size));
  };
  // A megatron role: TP as above, then TP x PP against its ranks; returns its DP size.
  const auto check_engine = [&](const std::string& prefix, const engine::EngineConfig& m,
                                const std::vector<int>& ranks) {
    check_tp(prefix + "tensor_model_parallel_size", m.tensor_model_parallel_size, ranks);
    const int64_t num_ranks = ranks.empty() ? world_size : int64_t(ranks.size());
    const int64_t model_parallel = m.tensor_model_parallel_size * m.pipeline_model_parallel_size;
    if (num_ranks % model_parallel != 0)
      throw ConfigError(prefix + "pipeline_model_parallel_size",
                        fmt::format("tensor_model_parallel_size x pipeline_model_parallel_size = {} x {} does not "
                                    "divide the role's {} ranks",
                                    m.tensor_model_parallel_size, m.pipeline_model_parallel_size, num_ranks));
    return num_ranks / model_parallel;
  };
  const ActorRolloutRefSection& roles = config.actor_rollout_ref;
  const int64_t actor_dp = check_engine("actor_rollout_ref.actor.megatron.", roles.actor.megatron, placement.actor);
  check_engine("actor_rollout_ref.ref.megatron.", roles.ref.megatron, placement.ref);
  check_tp("actor_rollout_ref.rollout.tensor_model_parallel_size", roles.rollout.tensor_model_parallel_size,
           placement.rollout);
  if (config.reward_model.enable) check_engine("reward_model.megatron.", config.reward_model.megatron, placement.reward_model);
  check_mini_batch_split("actor_rollout_ref.actor.ppo_mini_batch_size", roles.actor.ppo_mini_batch_size,
                         roles.rollout.sampling.n, actor_dp);
  int64_t critic_dp = 0;
  if (config.uses_critic()) {
    // The critic sits on its own ranks (the actor's unless critic.device_mapping says otherwise), in its own
    // layout.
    const int64_t critic_tp = config.critic.megatron.tensor_model_parallel_size;
    const int64_t critic_ranks = placement.critic.empty() ? world_size : int64_t(placement.critic.size());
    if (critic_ranks % critic_tp != 0)
      throw ConfigError("critic.megatron.tensor_model_parallel_size",
                        fmt::format("{} does not divide the critic's {} ranks", critic_tp, critic_ranks));
    critic_dp = check_engine("critic.megatron.", config.critic.megatron, placement.critic);
    check_mini_batch_split("critic.ppo_mini_batch_size", config.critic_ppo_mini_batch_size(), roles.rollout.sampling.n,
                           critic_dp);
  }
  // The pipelines, against the models. A role whose config names no model is refused by the run itself
  // (actor_rollout_ref.model.path, reward_model.model.path), with its own message.
  for (const MegatronRole& role : megatron_roles(config)) {
    if (role.model_dir.empty()) continue;
    check_model_layout(role);
    if (!role.megatron->splits_layers()) continue;
    const model::PipelineSplit split = pipeline_split(role);
    if (role.trains) check_update_schedule(config, role, split, role.name == "critic" ? critic_dp : actor_dp);
  }
}

}  // namespace rf::rl
