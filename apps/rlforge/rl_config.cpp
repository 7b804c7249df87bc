// RlConfig's cross-section checks: what no single section can see on its own (a mini-batch against the
// batch, the estimator against the roles rlforge has, the built-in task against the rule scorers), and
// the names the rl layer's registries must know, checked at read time so a typo fails before any work.
// Every error is keyed by the full dotted path the user wrote. The engine blocks' own rules (dtype,
// parallel sizes) are EngineConfig::validate's; the layout against the world is train_command.cpp's.
#include <fmt/format.h>

#include <functional>

#include "apps/rlforge/rl_config.h"
#include "apps/rlforge/yaml_json.h"
#include "core/error.h"
#include "data/task.h"
#include "rl/advantage_estimator.h"
#include "rl/agg_loss.h"
#include "rl/kl_controller.h"
#include "rl/kl_penalty.h"
#include "rl/policy_loss.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::apps {
namespace {

// The rl layer keys its errors by the short key it knows (adv_estimator, loss_agg_mode); the user
// wrote the full path.
void rekeyed(const std::string& key, const std::function<void()>& check) {
  try {
    check();
  } catch (const ConfigError& error) {
    throw ConfigError(key, error.detail());
  }
}

void require_positive(const std::string& key, int64_t value) {
  if (value <= 0) throw ConfigError(key, fmt::format("must be positive, got {}", value));
}

void require_positive(const std::string& key, const std::optional<int64_t>& value) {
  if (value) require_positive(key, *value);
}

void require_one_of(const std::string& key, const std::string& value, const std::vector<std::string>& allowed,
                    std::string_view why = "") {
  for (const std::string& name : allowed)
    if (value == name) return;
  throw ConfigError(key, fmt::format("'{}': expected {}{}", value, fmt::join(allowed, " or "), why));
}

// Sampling parameters of the rollout (`prefix` is rollout or rollout.val_kwargs).
void check_sampling(const std::string& prefix, double temperature, double top_p, int64_t top_k, int64_t n) {
  if (!(temperature >= 0))
    throw ConfigError(prefix + ".temperature", fmt::format("must be >= 0 (0: greedy), got {}", temperature));
  if (!(top_p > 0 && top_p <= 1)) throw ConfigError(prefix + ".top_p", fmt::format("must be in (0, 1], got {}", top_p));
  if (top_k < -1) throw ConfigError(prefix + ".top_k", fmt::format("must be >= 1, or -1 for off, got {}", top_k));
  if (n < 1) throw ConfigError(prefix + ".n", fmt::format("must be >= 1 response per prompt, got {}", n));
}

void check_algorithm(const AlgorithmConfig& algorithm) {
  rekeyed("algorithm.adv_estimator", [&] { rl::find_advantage_estimator(algorithm.adv_estimator); });
  if (algorithm.adv_estimator == "gae")
    throw ConfigError("algorithm.adv_estimator",
                      "'gae' needs the critic role (a value model), which rlforge does not have yet (issue #10); "
                      "use a critic-free estimator such as grpo");
  rekeyed("algorithm.kl_penalty", [&] { rl::parse_kl_penalty(algorithm.kl_penalty); });
  rekeyed("algorithm.kl_ctrl.type", [&] { rl::parse_kl_control_type(algorithm.kl_ctrl.type); });
  if (algorithm.kl_ctrl.type == "adaptive" && !(algorithm.kl_ctrl.horizon > 0))
    throw ConfigError("algorithm.kl_ctrl.horizon", fmt::format("must be positive, got {}", algorithm.kl_ctrl.horizon));
}

// ppo_mini_batch_size counts prompts; its micro-batches count responses (rollout.n per prompt).
void check_batch_sizes(const RlConfig& c) {
  const ActorSection& actor = c.actor_rollout_ref.actor;
  const int64_t batch = c.data.train_batch_size;
  const int64_t mini = actor.ppo_mini_batch_size;
  require_positive("data.train_batch_size", batch);
  require_positive("actor_rollout_ref.actor.ppo_mini_batch_size", mini);
  if (mini > batch || batch % mini != 0)
    throw ConfigError("actor_rollout_ref.actor.ppo_mini_batch_size",
                      fmt::format("{} does not divide data.train_batch_size = {}: a step's prompts are cut into "
                                  "whole mini-batches, so expected a divisor of {}",
                                  mini, batch, batch));
  require_positive("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", actor.ppo_micro_batch_size_per_gpu);
  const int64_t responses = mini * c.actor_rollout_ref.rollout.n;
  if (actor.ppo_micro_batch_size_per_gpu && responses % *actor.ppo_micro_batch_size_per_gpu != 0)
    throw ConfigError("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                      fmt::format("{} does not divide a mini-batch's {} responses (ppo_mini_batch_size {} x "
                                  "rollout.n {})",
                                  *actor.ppo_micro_batch_size_per_gpu, responses, mini, c.actor_rollout_ref.rollout.n));
  require_positive("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                   c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu);
  require_positive("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                   c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu);
}

void check_actor(const ActorSection& actor) {
  const std::string at = "actor_rollout_ref.actor.";
  require_one_of(at + "strategy", actor.strategy, {"megatron"}, " (rlforge's TrainEngine; fsdp is not available)");
  rekeyed(at + "policy_loss.loss_mode", [&] { rl::find_policy_loss(actor.policy_loss.loss_mode); });
  rekeyed(at + "loss_agg_mode", [&] { rl::parse_agg_mode(actor.loss_agg_mode); });
  rekeyed(at + "kl_loss_type", [&] { rl::parse_kl_penalty(actor.kl_loss_type); });
  require_positive(at + "ppo_epochs", actor.ppo_epochs);
  require_positive(at + "ppo_max_token_len_per_gpu", actor.ppo_max_token_len_per_gpu);
  if (!(actor.clip_ratio_c > 1))
    throw ConfigError(at + "clip_ratio_c", fmt::format("must be > 1 (the dual-clip bound), got {}", actor.clip_ratio_c));
}

void check_rollout(const RolloutSection& rollout) {
  const std::string at = "actor_rollout_ref.rollout.";
  require_one_of(at + "name", rollout.name, {"rlforge"},
                 " (rlforge's own engine; vllm, sglang and trtllm are not available here)");
  require_one_of(at + "dtype", rollout.dtype, {"bfloat16", "float32"});
  check_sampling("actor_rollout_ref.rollout", rollout.temperature, rollout.top_p, rollout.top_k, rollout.n);
  const ValKwargs& val = rollout.val_kwargs;
  check_sampling("actor_rollout_ref.rollout.val_kwargs", val.temperature, val.top_p, val.top_k, val.n);
  if (!(rollout.gpu_memory_utilization > 0 && rollout.gpu_memory_utilization <= 1))
    throw ConfigError(at + "gpu_memory_utilization",
                      fmt::format("must be in (0, 1], got {}", rollout.gpu_memory_utilization));
  require_positive(at + "kv_cache_bytes", rollout.kv_cache_bytes);
  require_positive(at + "block_size", rollout.block_size);
  require_positive(at + "tensor_model_parallel_size", rollout.tensor_model_parallel_size);
  require_positive(at + "max_num_batched_tokens", rollout.max_num_batched_tokens);
  require_positive(at + "max_num_seqs", rollout.max_num_seqs);
  require_positive(at + "prompt_length", rollout.prompt_length);
  require_positive(at + "response_length", rollout.response_length);
}

// Rewards come from the rule scorer of each row's data_source; a built-in task's data_source is its
// name, so a task without a scorer could never be rewarded.
void check_builtin_task(const RlDataConfig& data) {
  const std::unique_ptr<data::Task> task = data::make_task(data.task, yaml_to_json(data.task_kwargs), 0);
  try {
    rl::make_rule_scorer(task->name());
  } catch (const ConfigError&) {
    throw ConfigError("data.task",
                      fmt::format("'{}': the built-in task's data_source '{}' has no rule scorer, so its responses "
                                  "cannot be rewarded; expected a task whose data_source is one of: {}",
                                  data.task, task->name(), fmt::join(rl::rule_scorer_data_sources(), ", ")));
  }
}

void check_data(const RlDataConfig& data) {
  require_positive("data.max_prompt_length", data.max_prompt_length);
  require_positive("data.max_response_length", data.max_response_length);
  require_positive("data.val_size", data.val_size);
  if (data.train_files && data.train_files->empty())
    throw ConfigError("data.train_files", "expected at least one JSONL file, or null for the built-in task");
  if (!data.train_files) check_builtin_task(data);
}

void check_trainer(const RlTrainerConfig& trainer, bool builtin_task) {
  for (const std::string& name : trainer.logger)
    require_one_of("trainer.logger", name, {"console", "jsonl"}, " (wandb, tensorboard, ... are not available)");
  require_one_of("trainer.device", trainer.device, {"cpu"}, " (rlforge runs on the CPU)");
  require_one_of("trainer.resume_mode", trainer.resume_mode, {"auto", "disable", "resume_path"});
  if (trainer.resume_mode == "resume_path" &&
      (!trainer.resume_from_path || trainer.resume_from_path->find("global_step_") == std::string::npos))
    throw ConfigError("trainer.resume_from_path",
                      "resume_mode resume_path needs the path of a checkpoint folder, .../global_step_<k>");
  require_positive("trainer.total_training_steps", trainer.total_training_steps);
  if (builtin_task && !trainer.total_training_steps)
    throw ConfigError("trainer.total_training_steps",
                      "required with a built-in task (data.train_files is null): its prompts never run out, so "
                      "there is no epoch to count");
  require_positive("trainer.nnodes", trainer.nnodes);
  require_positive("trainer.n_gpus_per_node", trainer.n_gpus_per_node);
  require_positive("trainer.max_actor_ckpt_to_keep", trainer.max_actor_ckpt_to_keep);
  if (trainer.critic_warmup != 0)
    throw ConfigError("trainer.critic_warmup",
                      fmt::format("{}: expected 0, rlforge has no critic yet (issue #10)", trainer.critic_warmup));
  if (trainer.num_threads < 0)
    throw ConfigError("trainer.num_threads", fmt::format("must be >= 0 (0: cores / ranks), got {}", trainer.num_threads));
  if (trainer.time_budget_s && !(*trainer.time_budget_s > 0))
    throw ConfigError("trainer.time_budget_s", fmt::format("must be positive seconds, got {}", *trainer.time_budget_s));
}

}  // namespace

void RlConfig::validate() const {
  if (!actor_rollout_ref.hybrid_engine)
    throw ConfigError("actor_rollout_ref.hybrid_engine",
                      "false: expected true (actor, rollout and reference share the ranks in rlforge)");
  require_one_of("actor_rollout_ref.ref.strategy", actor_rollout_ref.ref.strategy, {"megatron"});
  check_algorithm(algorithm);
  check_actor(actor_rollout_ref.actor);
  check_rollout(actor_rollout_ref.rollout);
  check_batch_sizes(*this);
  check_data(data);
  check_trainer(trainer, !data.train_files);
  if (!(resources.device_memory_gb > 0))
    throw ConfigError("resources.device_memory_gb", fmt::format("must be positive, got {}", resources.device_memory_gb));
}

std::string RlConfig::run_dir() const {
  return trainer.default_local_dir.value_or(
      fmt::format("checkpoints/{}/{}", trainer.project_name, trainer.experiment_name));
}

int64_t RlConfig::prompt_length() const {
  return actor_rollout_ref.rollout.prompt_length.value_or(data.max_prompt_length);
}

int64_t RlConfig::response_length() const {
  return actor_rollout_ref.rollout.response_length.value_or(data.max_response_length);
}

}  // namespace rf::apps
