// RlConfig's cross-section checks: what no single section can see on its own (a mini-batch against the
// batch, the critic's keys with the actor's values they follow, the built-in task against the rule scorers and
// against the keys only JSONL files use), and the names the rl layer's registries must know, checked at
// read time so a typo fails before any work.
// Every error is keyed by the full dotted path the user wrote. The engine blocks' own rules (dtype,
// parallel sizes) are EngineConfig::validate's; the layout against the world is train_command.cpp's.
#include <fmt/format.h>

#include <functional>

#include "rl/trainer/rl_config.h"
#include "config/yaml_json.h"
#include "config/bind.h"
#include "core/error.h"
#include "data/data_config.h"
#include "data/task.h"
#include "rl/advantage_estimator.h"
#include "rl/agg_loss.h"
#include "rl/kl_controller.h"
#include "rl/kl_penalty.h"
#include "rl/policy_loss.h"
#include "rl/rewards/reward_scorer.h"
#include "trainer/run_folder.h"

namespace rf::rl {
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

// The same for a section's own check, whose keys are relative to `section`.
void rekeyed_under(const std::string& section, const std::function<void()>& check) {
  try {
    check();
  } catch (const ConfigError& error) {
    throw ConfigError(section + "." + error.key_path(), error.detail());
  }
}

void require_positive(const std::string& key, int64_t value) {
  if (value <= 0) throw ConfigError(key, fmt::format("must be positive, got {}", value));
}

void require_positive(const std::string& key, const std::optional<int64_t>& value) {
  if (value) require_positive(key, *value);
}

void require_nonempty(const std::string& key, const std::string& value) {
  if (value.empty()) throw ConfigError(key, "must not be empty");
}

void require_one_of(const std::string& key, const std::string& value, const std::vector<std::string>& allowed,
                    std::string_view why = "") {
  for (const std::string& name : allowed)
    if (value == name) return;
  throw ConfigError(key, fmt::format("'{}': expected {}{}", value, fmt::join(allowed, " or "), why));
}

void check_algorithm(const AlgorithmConfig& algorithm) {
  rekeyed("algorithm.adv_estimator", [&] { rl::find_advantage_estimator(algorithm.adv_estimator); });
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
  const int64_t responses = mini * c.actor_rollout_ref.rollout.sampling.n;
  if (actor.ppo_micro_batch_size_per_gpu && responses % *actor.ppo_micro_batch_size_per_gpu != 0)
    throw ConfigError("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                      fmt::format("{} does not divide a mini-batch's {} responses (ppo_mini_batch_size {} x "
                                  "rollout.n {})",
                                  *actor.ppo_micro_batch_size_per_gpu, responses, mini, c.actor_rollout_ref.rollout.sampling.n));
  require_positive("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                   c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu);
  // By tokens, every response (prompt + response) must fit one micro-batch (verl asserts the same).
  const int64_t longest = c.prompt_length() + c.response_length();
  if (actor.use_dynamic_bsz && actor.ppo_max_token_len_per_gpu < longest)
    throw ConfigError("actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                      fmt::format("{} is below the longest sequence, {} prompt + {} response tokens: with "
                                  "use_dynamic_bsz every sequence must fit one micro-batch",
                                  actor.ppo_max_token_len_per_gpu, c.prompt_length(), c.response_length()));
  require_positive("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                   c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu);
}

// The critic's keys, each with the actor's value where it follows the actor. Checked whether or not the
// critic is built: a value no critic could run with (critic.strategy: mindspeed) is an error in a GRPO
// config too, not something that waits for the day the critic is switched on.
void check_critic(const RlConfig& c) {
  const std::string at = "critic.";
  require_one_of(at + "strategy", c.critic.strategy, {"megatron"}, " (rlforge's TrainEngine; fsdp is not available)");
  require_positive(at + "ppo_epochs", c.critic_ppo_epochs());
  require_positive(at + "ppo_max_token_len_per_gpu", c.critic.ppo_max_token_len_per_gpu);
  if (c.critic_use_dynamic_bsz() && c.critic.ppo_max_token_len_per_gpu < c.prompt_length() + c.response_length())
    throw ConfigError(at + "ppo_max_token_len_per_gpu",
                      fmt::format("{} is below the longest sequence, {} tokens: with use_dynamic_bsz every sequence "
                                  "must fit one micro-batch",
                                  c.critic.ppo_max_token_len_per_gpu, c.prompt_length() + c.response_length()));
  const int64_t batch = c.data.train_batch_size;
  const int64_t mini = c.critic_ppo_mini_batch_size();
  require_positive(at + "ppo_mini_batch_size", mini);
  if (mini > batch || batch % mini != 0)
    throw ConfigError(at + "ppo_mini_batch_size",
                      fmt::format("{} does not divide data.train_batch_size = {}: a step's prompts are cut into "
                                  "whole mini-batches, so expected a divisor of {}",
                                  mini, batch, batch));
  const std::optional<int64_t> micro = c.critic.ppo_micro_batch_size_per_gpu;
  require_positive(at + "ppo_micro_batch_size_per_gpu", micro);
  const int64_t responses = mini * c.actor_rollout_ref.rollout.sampling.n;
  if (micro && responses % *micro != 0)
    throw ConfigError(at + "ppo_micro_batch_size_per_gpu",
                      fmt::format("{} does not divide a mini-batch's {} responses (ppo_mini_batch_size {} x "
                                  "rollout.n {})",
                                  *micro, responses, mini, c.actor_rollout_ref.rollout.sampling.n));
}

void check_actor(const ActorSection& actor) {
  const std::string at = "actor_rollout_ref.actor.";
  require_one_of(at + "strategy", actor.strategy, {"megatron"}, " (rlforge's TrainEngine; fsdp is not available)");
  require_positive(at + "ppo_epochs", actor.ppo_epochs);
  require_positive(at + "ppo_max_token_len_per_gpu", actor.ppo_max_token_len_per_gpu);
}

// Rewards come from the rule scorer of each row's data_source; a built-in task's data_source is its
// name, so a task without a scorer could never be rewarded. (The data_source values of JSONL files are
// checked when the trainer reads them.)
void check_builtin_task(const RlDataConfig& data) {
  const std::string name = data.builtin_task();
  const std::unique_ptr<data::Task> task = data::make_task(name, config::yaml_to_json(data.task_kwargs), 0);
  try {
    rl::make_rule_scorer(task->name());
  } catch (const ConfigError&) {
    throw ConfigError("data.task",
                      fmt::format("'{}': the built-in task's data_source '{}' has no rule scorer, so its responses "
                                  "cannot be rewarded; expected a task whose data_source is one of: {}",
                                  name, task->name(), fmt::join(rl::rule_scorer_data_sources(), ", ")));
  }
}

// The keys that only mean something for JSONL files, set to other than verl's default with a built-in
// task: they would change nothing, which is not what their user asked for.
void reject_file_keys(const RlDataConfig& data) {
  const auto reject = [](const std::string& key, bool set) {
    if (set)
      throw ConfigError("data." + key, "applies to the rows of data.train_files; a built-in task (data.train_files "
                                       "null) draws its prompts from data.seed: leave it at verl's default");
  };
  reject("val_files", data.val_files.has_value());
  reject("prompt_key", data.prompt_key != "prompt");
  reject("reward_fn_key", data.reward_fn_key != "data_source");
  reject("filter_overlong_prompts", data.filter_overlong_prompts);
  reject("shuffle", !data.shuffle);
}

// `rule_rewards`: no custom_reward_function, so the rule scorers must know the task's data_source.
void check_data(const RlDataConfig& data, const RlTrainerConfig& trainer, bool rule_rewards) {
  require_positive("data.max_prompt_length", data.max_prompt_length);
  require_positive("data.max_response_length", data.max_response_length);
  require_positive("data.val_size", data.val_size);
  rekeyed_under("data", [&] { data::check_data_source(data.task, data.task_kwargs, data.train_files, data.val_files); });
  if (!data.train_files) {
    reject_file_keys(data);
    if (rule_rewards) check_builtin_task(data);
    return;
  }
  if (!data.val_files && trainer.test_freq > 0)
    throw ConfigError("data.val_files", fmt::format("null, but trainer.test_freq is {}: validation reads the rows of "
                                                    "data.val_files (set them, or trainer.test_freq: -1)",
                                                    trainer.test_freq));
  require_nonempty("data.prompt_key", data.prompt_key);
  require_nonempty("data.reward_fn_key", data.reward_fn_key);
}

// The reward model's keys, when it is on (reward_model.enable); its folder is checked when it is opened.
void check_reward_model(const RewardModelSection& rm) {
  require_one_of("reward_model.strategy", rm.strategy, {"megatron"}, " (rlforge's InferEngine)");
  if (!rm.model.path)
    throw ConfigError("reward_model.model.path",
                      "reward_model.enable is true: name the reward model's HF folder (*ForSequenceClassification)");
  require_positive("reward_model.micro_batch_size_per_gpu", rm.micro_batch_size_per_gpu);
  require_positive("reward_model.forward_max_token_len_per_gpu", rm.forward_max_token_len_per_gpu);
  require_positive("reward_model.max_length", rm.max_length);
}

void check_trainer(const RlTrainerConfig& trainer, bool builtin_task) {
  require_one_of("trainer.device", trainer.device, {"cpu"}, " (rlforge runs on the CPU)");
  if (trainer.resume_mode == ResumeMode::resume_path) {
    if (!trainer.resume_from_path)
      throw ConfigError("trainer.resume_from_path",
                        "resume_mode resume_path needs the path of a checkpoint folder, .../global_step_<k>");
    (void)rf::trainer::checkpoint_ref(*trainer.resume_from_path, "trainer.resume_from_path");
  }
  require_positive("trainer.total_training_steps", trainer.total_training_steps);
  if (!trainer.total_training_steps)
    throw ConfigError("trainer.total_training_steps",
                      builtin_task ? "required with a built-in task (data.train_files is null): its prompts never "
                                     "run out, so there is no epoch to count"
                                   : "required: verl's default, trainer.total_epochs x batches per epoch, needs "
                                     "trainer.total_epochs, which rlforge does not implement yet");
  require_positive("trainer.nnodes", trainer.nnodes);
  require_positive("trainer.n_gpus_per_node", trainer.n_gpus_per_node);
  require_positive("trainer.max_actor_ckpt_to_keep", trainer.max_actor_ckpt_to_keep);
  require_positive("trainer.max_critic_ckpt_to_keep", trainer.max_critic_ckpt_to_keep);
  if (trainer.critic_warmup < 0)
    throw ConfigError("trainer.critic_warmup",
                      fmt::format("must be >= 0 (the step the actor starts training at), got {}", trainer.critic_warmup));
  if (trainer.log_val_generations < 0)
    throw ConfigError("trainer.log_val_generations",
                      fmt::format("must be >= 0 (the validation samples to log), got {}", trainer.log_val_generations));
  if (trainer.num_threads < 0)
    throw ConfigError("trainer.num_threads", fmt::format("must be >= 0 (0: cores / ranks), got {}", trainer.num_threads));
  if (trainer.time_budget_s && !(*trainer.time_budget_s > 0))
    throw ConfigError("trainer.time_budget_s", fmt::format("must be positive seconds, got {}", *trainer.time_budget_s));
}

}  // namespace

void RolloutSection::validate() const {
  require_one_of("name", name, {"rlforge"}, " (rlforge's own engine; vllm, sglang and trtllm are not available here)");
  require_one_of("dtype", dtype, {"bfloat16", "float32"});
  sampling.validate();
  engine.validate();
  require_positive("tensor_model_parallel_size", tensor_model_parallel_size);
  require_positive("prompt_length", prompt_length);
  require_positive("response_length", response_length);
}

void RlConfig::validate() const {
  if (!actor_rollout_ref.hybrid_engine)
    throw ConfigError("actor_rollout_ref.hybrid_engine",
                      "false: expected true (rlforge places roles on ranks with actor_rollout_ref.<role>.device_mapping)");
  require_one_of("actor_rollout_ref.ref.strategy", actor_rollout_ref.ref.strategy, {"megatron"});
  check_algorithm(algorithm);
  check_actor(actor_rollout_ref.actor);
  check_batch_sizes(*this);
  if (algorithm.adv_estimator == "gae" && !uses_critic())
    throw ConfigError("critic.enable", "false, but algorithm.adv_estimator gae needs the critic's values: enable it "
                                       "(or null), or pick an estimator without values (grpo, rloo, ...)");
  check_critic(*this);
  if (reward_model.enable) {
    check_reward_model(reward_model);
    const int64_t rm_longest = reward_model.max_length.value_or(prompt_length() + response_length());
    if (reward_model.use_dynamic_bsz.value_or(actor_rollout_ref.actor.use_dynamic_bsz) &&
        reward_model.forward_max_token_len_per_gpu < rm_longest)
      throw ConfigError("reward_model.forward_max_token_len_per_gpu",
                        fmt::format("{} is below the longest sequence the reward model reads, {} tokens: with "
                                    "use_dynamic_bsz every sequence must fit one forward",
                                    reward_model.forward_max_token_len_per_gpu, rm_longest));
  }
  overlong_buffer();
  // With a reward model, the reward function scores validation only.
  check_data(data, trainer, !custom_reward_function.path && (!reward_model.enable || trainer.test_freq > 0));
  check_trainer(trainer, !data.train_files);
  if (!(resources.device_memory_gb > 0))
    throw ConfigError("resources.device_memory_gb", fmt::format("must be positive, got {}", resources.device_memory_gb));
}

rl::OverlongBufferConfig RlConfig::overlong_buffer() const {
  const std::string key = "reward_model.reward_kwargs";
  const bool has_kwargs = reward_model.reward_kwargs.IsDefined() && !reward_model.reward_kwargs.IsNull() &&
                          reward_model.reward_kwargs.size() > 0;
  if (reward_model.reward_manager == RewardManager::naive) {
    if (has_kwargs) throw ConfigError(key, "the naive reward manager takes no arguments (dapo takes overlong_buffer_cfg)");
    return {};
  }
  const DapoRewardKwargs kwargs =
      has_kwargs ? config::bind<DapoRewardKwargs>(reward_model.reward_kwargs, key) : DapoRewardKwargs{};
  rl::OverlongBufferConfig buffer = kwargs.overlong_buffer_cfg;
  if (!buffer.enable) return {};
  if (!kwargs.max_resp_len)
    throw ConfigError(key + ".max_resp_len", "required with overlong_buffer_cfg.enable (verl: max_resp_len must be "
                                             "provided): the response length the buffer ends at");
  if (*kwargs.max_resp_len < buffer.len)
    throw ConfigError(key + ".max_resp_len", fmt::format("{} is below overlong_buffer_cfg.len {}: the buffer is its "
                                                         "last tokens",
                                                         *kwargs.max_resp_len, buffer.len));
  buffer.max_resp_len = *kwargs.max_resp_len;
  return buffer;
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

std::string RlConfig::critic_model_path() const {
  return critic.model.path.value_or(actor_rollout_ref.model.path.value_or(""));
}

int64_t RlConfig::critic_ppo_mini_batch_size() const {
  return critic.ppo_mini_batch_size.value_or(actor_rollout_ref.actor.ppo_mini_batch_size);
}

bool RlConfig::critic_use_dynamic_bsz() const {
  return critic.use_dynamic_bsz.value_or(actor_rollout_ref.actor.use_dynamic_bsz);
}

int64_t RlConfig::critic_ppo_epochs() const { return critic.ppo_epochs.value_or(actor_rollout_ref.actor.ppo_epochs); }

bool RlConfig::critic_shuffle() const { return critic.shuffle.value_or(actor_rollout_ref.actor.shuffle); }

uint64_t RlConfig::critic_data_loader_seed() const {
  return critic.data_loader_seed.value_or(actor_rollout_ref.actor.data_loader_seed);
}

rl::AggMode RlConfig::critic_loss_agg_mode() const {
  return critic.loss_agg_mode.value_or(actor_rollout_ref.actor.loss.loss_agg_mode);
}

}  // namespace rf::rl
