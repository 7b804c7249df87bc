// The `rlforge train` config: verl's ppo_megatron_trainer.yaml key tree (spec verl.md §4) for what
// rlforge implements, with verl's defaults, plus rlforge's own keys where a CPU product needs them
// (each marked "rlforge:" in its description). Known verl keys rlforge does not implement are not
// fields here: rl_config_policy.h accepts them at verl's default (with a warning) and rejects any
// other value; keys verl does not know either are errors (bind.h).
// Sections: actor_rollout_ref.{model, actor, ref, rollout}, critic, data, algorithm, trainer, resources,
// custom_reward_function, reward_model.
// critic: verl interpolates several of its keys from the actor's; here those are null and fall back to the
// actor's value in code (RlConfig::critic_*), and critic.megatron takes every key the user did not set from
// actor.megatron (train_command.cpp), as verl's ${oc.select:...} does.
// Cross-section checks (mini-batches dividing the batch, ...) are RlConfig::validate (rl_config.cpp).
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/path_list.h"
#include "core/error.h"
#include "engine/engine_config.h"
#include "engine/rollout/rollout_config.h"
#include "engine/rollout/rollout_request.h"
#include "optim/optim_config.h"
#include "rl/actor_loss.h"
#include "rl/agg_loss.h"
#include "rl/critic_loss.h"
#include "rl/kl_controller.h"
#include "rl/kl_penalty.h"
#include "rl/rewards/overlong_penalty.h"
#include "rl/rewards/python_reward_pool.h"
#include "trainer/run_keys.h"

namespace rf::rl {

// A prompt over max_prompt_length (data.truncation): refused, or cut keeping its end, its start or both ends.
enum class Truncation : uint8_t { error, left, right, middle };
constexpr std::array<std::pair<Truncation, std::string_view>, 4> enum_names(Truncation) {
  return {{{Truncation::error, "error"}, {Truncation::left, "left"}, {Truncation::right, "right"}, {Truncation::middle, "middle"}}};
}

using trainer::Logger;
using trainer::ResumeMode;

// reward_model.reward_manager: the score as given, or with DAPO's overlong penalty.
enum class RewardManager : uint8_t { naive, dapo };
constexpr std::array<std::pair<RewardManager, std::string_view>, 2> enum_names(RewardManager) {
  return {{{RewardManager::naive, "naive"}, {RewardManager::dapo, "dapo"}}};
}

struct RlModelConfig {  // actor_rollout_ref.model
  std::optional<std::string> path;            // HF folder (config.json, safetensors, tokenizer.json)
  std::optional<std::string> tokenizer_path;  // null: path's tokenizer, else builtin:<data.task>
  YAML::Node config;                          // rlforge: a new model's config.json fields when path is null

  template <class Fields>
  void fields(Fields& f) {
    f("path", path, "HF model folder the actor, rollout and reference start from");
    f("tokenizer_path", tokenizer_path,
      "folder with tokenizer.json, or builtin:<task> (null: path's own tokenizer, else builtin:<data.task>)");
    f("config", config, "rlforge: HF config.json fields of a new, randomly initialised model when path is null");
  }
};

// actor_rollout_ref.actor.router_replay.mode (verl; ROLL's router_replay.mode): which routing the actor's MoE layers
// use. R2: the old-log-prob pass records its routing, the update replays it; R3: the old-log-prob pass and the update
// replay the rollout's routing (rl_roles.h).
enum class RouterReplayMode : uint8_t { disabled, r2, r3 };
constexpr std::array<std::pair<RouterReplayMode, std::string_view>, 3> enum_names(RouterReplayMode) {
  return {{{RouterReplayMode::disabled, "disabled"}, {RouterReplayMode::r2, "R2"}, {RouterReplayMode::r3, "R3"}}};
}

struct RouterReplaySection {  // actor_rollout_ref.actor.router_replay
  RouterReplayMode mode = RouterReplayMode::disabled;

  template <class Fields>
  void fields(Fields& f) {
    f("mode", mode,
      "MoE router replay: disabled; R2 (the old-log-prob pass's routing replayed in the update); R3 (the rollout's "
      "routing replayed in the old-log-prob pass and the update). MoE models only");
  }
};

struct ActorSection {  // actor_rollout_ref.actor
  std::string strategy = "megatron";
  YAML::Node device_mapping;  // role_placement.h
  int64_t ppo_mini_batch_size = 256;                      // prompts per optimizer step (x rollout.n responses)
  std::optional<int64_t> ppo_micro_batch_size_per_gpu;    // responses per micro-batch
  bool use_dynamic_bsz = false;
  int64_t ppo_max_token_len_per_gpu = 16384;
  rl::ActorLossConfig loss;  // its keys spliced into this block, as verl keeps them (actor_loss.h)
  bool calculate_entropy = false;
  int64_t ppo_epochs = 1;
  bool shuffle = false;
  uint64_t data_loader_seed = 42;
  optim::OptimConfig optim;
  engine::EngineConfig megatron;
  RouterReplaySection router_replay;

  template <class Fields>
  void fields(Fields& f) {
    f("strategy", strategy, "training engine: megatron (rlforge's TrainEngine)");
    f("ppo_mini_batch_size", ppo_mini_batch_size, "prompts per optimizer step (each with rollout.n responses)");
    f("ppo_micro_batch_size_per_gpu", ppo_micro_batch_size_per_gpu,
      "responses per micro-batch (null: the whole mini-batch share in one)");
    f("use_dynamic_bsz", use_dynamic_bsz, "pack micro-batches by tokens up to ppo_max_token_len_per_gpu");
    f("ppo_max_token_len_per_gpu", ppo_max_token_len_per_gpu, "token budget of a micro-batch with use_dynamic_bsz");
    loss.fields(f);
    f("calculate_entropy", calculate_entropy, "compute the entropy in the update even when entropy_coeff is 0");
    f("ppo_epochs", ppo_epochs, "passes over each step's batch");
    f("shuffle", shuffle, "shuffle the responses before cutting mini-batches, each epoch");
    f("data_loader_seed", data_loader_seed, "seed of the mini-batch shuffle");
    f("optim", optim, "optimizer and learning-rate schedule");
    f("megatron", megatron, "the actor's engine: parallel layout, dtype, offload");
    f("router_replay", router_replay, "MoE router replay (R2 / R3)");
    f("device_mapping", device_mapping,
      "rlforge (ROLL's device_mapping): this role's world ranks, a list or 'list(range(a,b))' (null: every rank)");
  }
  void validate() const { loss.validate(); }
};

struct RefSection {  // actor_rollout_ref.ref
  std::string strategy = "megatron";
  std::optional<int64_t> log_prob_micro_batch_size_per_gpu;
  engine::EngineConfig megatron;
  YAML::Node device_mapping;  // role_placement.h

  template <class Fields>
  void fields(Fields& f) {
    f("strategy", strategy, "reference engine: megatron");
    f("log_prob_micro_batch_size_per_gpu", log_prob_micro_batch_size_per_gpu,
      "responses per forward (null: the actor's log-prob micro-batch)");
    f("megatron", megatron, "the reference's layout and dtype (param_offload: keep its weights off the device tier)");
    f("device_mapping", device_mapping,
      "rlforge (ROLL's device_mapping): the reference's world ranks (null: the actor's)");
  }
};

// verl's rollout.val_kwargs defaults: one greedy response per prompt.
inline engine::rollout::RolloutSamplingParams validation_sampling_defaults() {
  engine::rollout::RolloutSamplingParams sampling;
  sampling.temperature = 0.0;
  sampling.do_sample = false;
  return sampling;
}

// verl's rollout defaults for the engine where they differ from the engine's own (prefix caching on).
inline engine::rollout::RolloutConfig rollout_engine_defaults() {
  engine::rollout::RolloutConfig engine;
  engine.enable_prefix_caching = true;
  return engine;
}

struct CheckpointEngineSection {  // actor_rollout_ref.rollout.checkpoint_engine: the weight sync (weight_sync.h)
  std::string backend = "naive";
  int64_t update_weights_bucket_megabytes = 2048;

  template <class Fields>
  void fields(Fields& f) {
    f("backend", backend, "naive: rlforge's WeightSync over its MPI ranks (nccl, hccl and nixl are GPU transports)");
    f("update_weights_bucket_megabytes", update_weights_bucket_megabytes,
      "bytes per broadcast of the actor's weights to rollout ranks it does not share, in MiB");
  }
  void validate() const {
    if (backend != "naive")
      throw ConfigError("backend", fmt::format("'{}': expected naive (rlforge's weight sync over MPI; nccl, hccl and "
                                               "nixl move GPU memory)",
                                               backend));
    if (update_weights_bucket_megabytes <= 0)
      throw ConfigError("update_weights_bucket_megabytes",
                        fmt::format("must be positive, got {}", update_weights_bucket_megabytes));
  }
};

struct RolloutSection {  // actor_rollout_ref.rollout
  std::string name = "rlforge";
  YAML::Node device_mapping;  // role_placement.h
  engine::rollout::RolloutSamplingParams sampling;  // its keys spliced into this block, as verl keeps them
  std::optional<int64_t> prompt_length;    // null: data.max_prompt_length
  std::optional<int64_t> response_length;  // null: data.max_response_length
  std::string dtype = "float32";
  engine::rollout::RolloutConfig engine = rollout_engine_defaults();  // its keys spliced as well
  bool free_cache_engine = true;
  int64_t tensor_model_parallel_size = 1;
  std::optional<int64_t> log_prob_micro_batch_size_per_gpu;
  bool calculate_log_probs = true;
  engine::rollout::RolloutSamplingParams val_kwargs = validation_sampling_defaults();
  CheckpointEngineSection checkpoint_engine;

  template <class Fields>
  void fields(Fields& f) {
    f("name", name, "rollout engine: rlforge (rlforge's paged, continuously batching RolloutEngine)");
    sampling.fields(f);
    f("ignore_eos", sampling.ignore_eos, "keep generating after eos");
    f("prompt_length", prompt_length, "max prompt tokens (null: data.max_prompt_length)");
    f("response_length", response_length, "max response tokens (null: data.max_response_length)");
    f("dtype", dtype, "rlforge default float32: rollout compute dtype, bfloat16 or float32");
    engine.fields(f);
    f("free_cache_engine", free_cache_engine,
      "release the KV cache while the actor trains, and a colocated rollout's own weight copy (one of another "
      "TP size or dtype than the actor's) from generation to the next weight sync");
    f("tensor_model_parallel_size", tensor_model_parallel_size, "rlforge default 1: the rollout's own TP size");
    f("device_mapping", device_mapping,
      "rlforge (ROLL's device_mapping): this role's world ranks, a list or 'list(range(a,b))' (null: every rank)");
    f("log_prob_micro_batch_size_per_gpu", log_prob_micro_batch_size_per_gpu,
      "responses per forward of the old-log-prob pass (null: the actor's micro-batch)");
    f("calculate_log_probs", calculate_log_probs,
      "rlforge default true: return the rollout's log-probs (logged against the recomputed old log-probs)");
    f("val_kwargs", val_kwargs, "sampling in validation (ignore_eos: the rollout's)");
    f("checkpoint_engine", checkpoint_engine, "how the actor's weights reach the rollout after each update");
  }
  // ConfigError keyed relative to this block: the sampling's and the engine's own rules, then this block's.
  void validate() const;
};

struct ActorRolloutRefSection {
  bool hybrid_engine = true;
  RlModelConfig model;
  ActorSection actor;
  RefSection ref;
  RolloutSection rollout;

  template <class Fields>
  void fields(Fields& f) {
    f("hybrid_engine", hybrid_engine, "actor, rollout and reference share the ranks (must be true)");
    f("model", model, "the policy model");
    f("actor", actor, "the trained policy");
    f("ref", ref, "the frozen reference policy (used with use_kl_loss or use_kl_in_reward)");
    f("rollout", rollout, "generation");
  }
};

struct CriticModelConfig {  // critic.model
  std::optional<std::string> path;  // null: actor_rollout_ref.model.path

  template <class Fields>
  void fields(Fields& f) {
    f("path", path,
      "HF folder the critic starts from: an LM's (its backbone under a new value head) or a "
      "*ForTokenClassification one (null: actor_rollout_ref.model.path)");
  }
};

// verl's critic optimizer defaults differ from the actor's in the learning rate only.
inline optim::OptimConfig critic_optim_defaults() {
  optim::OptimConfig optim;
  optim.lr = 1e-5;
  return optim;
}

struct CriticSection {  // critic: the value model of algorithm.adv_estimator gae
  std::optional<bool> enable;  // null: built for adv_estimator gae
  YAML::Node device_mapping;   // role_placement.h
  std::string strategy = "megatron";
  CriticModelConfig model;
  optim::OptimConfig optim = critic_optim_defaults();
  std::optional<int64_t> ppo_mini_batch_size;           // null: the actor's
  std::optional<int64_t> ppo_micro_batch_size_per_gpu;  // null: the whole mini-batch share in one
  std::optional<bool> use_dynamic_bsz;                  // null: the actor's
  int64_t ppo_max_token_len_per_gpu = 32768;
  std::optional<int64_t> ppo_epochs;                    // null: the actor's
  std::optional<bool> shuffle;                          // null: the actor's
  std::optional<uint64_t> data_loader_seed;             // null: the actor's
  rl::CriticLossConfig loss;                            // its keys spliced into this block (critic_loss.h)
  std::optional<rl::AggMode> loss_agg_mode;             // null: the actor's
  engine::EngineConfig megatron;

  template <class Fields>
  void fields(Fields& f) {
    f("enable", enable,
      "build and train the critic (null: when algorithm.adv_estimator is gae, which needs its values)");
    f("strategy", strategy, "critic engine: megatron (rlforge's TrainEngine)");
    f("model", model, "the value model");
    f("optim", optim, "the critic's optimizer and learning-rate schedule");
    f("ppo_mini_batch_size", ppo_mini_batch_size,
      "prompts per critic optimizer step, each with rollout.n responses (null: the actor's)");
    f("ppo_micro_batch_size_per_gpu", ppo_micro_batch_size_per_gpu,
      "responses per micro-batch of the values pass and the update (null: the whole mini-batch share in one)");
    f("use_dynamic_bsz", use_dynamic_bsz,
      "pack micro-batches by tokens up to ppo_max_token_len_per_gpu (null: the actor's)");
    f("ppo_max_token_len_per_gpu", ppo_max_token_len_per_gpu, "token budget of a micro-batch with use_dynamic_bsz");
    f("ppo_epochs", ppo_epochs, "passes over each step's batch (null: the actor's)");
    f("shuffle", shuffle, "shuffle the responses before cutting mini-batches, each epoch (null: the actor's)");
    f("data_loader_seed", data_loader_seed, "seed of the mini-batch shuffle (null: the actor's)");
    loss.fields(f);
    f("loss_agg_mode", loss_agg_mode, "aggregation of the value loss (null: the actor's)");
    f("megatron", megatron, "the critic's engine: parallel layout, dtype, offload (each key not set: the actor's)");
    f("device_mapping", device_mapping,
      "rlforge (ROLL's device_mapping): the critic's world ranks (null: the actor's)");
  }
  void validate() const { loss.validate(); }
};

struct RewardModelModelConfig {  // reward_model.model
  std::optional<std::string> path;
  std::optional<std::string> input_tokenizer;

  template <class Fields>
  void fields(Fields& f) {
    f("path", path, "HF folder of the reward model: a *ForSequenceClassification one with one label");
    f("input_tokenizer", input_tokenizer,
      "the policy's tokenizer folder when the reward model has another tokenizer: each response is decoded "
      "with it and the chat (prompt messages + the response) re-rendered with the reward model's chat "
      "template (verl's switch). null (rlforge's default): the reward model reads the rollout's token ids, "
      "which needs the same tokenizer (checked)");
  }
};

struct DapoRewardKwargs {  // reward_model.reward_kwargs of reward_manager dapo
  rl::OverlongBufferConfig overlong_buffer_cfg;  // its max_resp_len is the one below
  std::optional<int64_t> max_resp_len;

  template <class Fields>
  void fields(Fields& f) {
    f("overlong_buffer_cfg", overlong_buffer_cfg, "DAPO's overlong reward shaping (rl/rewards/overlong_penalty.h)");
    f("max_resp_len", max_resp_len, "the response length the buffer ends at (required with the buffer)");
  }
};

struct RewardModelSection {  // reward_model: a model's score replaces the reward function's in training
  bool enable = false;
  std::string strategy = "megatron";
  RewardModelModelConfig model;
  std::optional<int64_t> micro_batch_size_per_gpu;  // null: the actor's log-prob micro-batch
  std::optional<bool> use_dynamic_bsz;              // null: the actor's
  int64_t forward_max_token_len_per_gpu = 32768;
  std::optional<int64_t> max_length;  // null: prompt + response length
  engine::EngineConfig megatron;
  YAML::Node device_mapping;  // role_placement.h
  RewardManager reward_manager = RewardManager::naive;
  YAML::Node reward_kwargs;  // free-form, as verl's `+reward_model.reward_kwargs...` adds it: DapoRewardKwargs

  template <class Fields>
  void fields(Fields& f) {
    f("reward_manager", reward_manager,
      "naive (the score as the reward function or model gives it) or dapo (plus DAPO's overlong penalty, "
      "configured by reward_kwargs); verl's batch and prime are not needed: rlforge's Python reward pool already "
      "scores a batch in parallel with the per-sample function");
    f("reward_kwargs", reward_kwargs,
      "the reward manager's arguments: dapo's overlong_buffer_cfg {enable, len, penalty_factor, log} and "
      "max_resp_len (null: none)");
    f("enable", enable,
      "score training responses with the reward model (its score at the last token replaces the reward "
      "function's, verl's naive manager); validation still scores with the reward function");
    f("strategy", strategy, "reward model engine: megatron (rlforge's InferEngine)");
    f("model", model, "the reward model");
    f("micro_batch_size_per_gpu", micro_batch_size_per_gpu,
      "responses per forward (null: the actor's log-prob micro-batch)");
    f("use_dynamic_bsz", use_dynamic_bsz,
      "pack forwards by tokens up to forward_max_token_len_per_gpu (null: the actor's)");
    f("forward_max_token_len_per_gpu", forward_max_token_len_per_gpu, "token budget of a forward with use_dynamic_bsz");
    f("max_length", max_length,
      "with input_tokenizer: the re-rendered sequence's token limit, longer ones keep their first tokens "
      "(null: data.max_prompt_length + data.max_response_length)");
    f("megatron", megatron, "the reward model's layout, dtype and param_offload (each key not set: the actor's)");
    f("device_mapping", device_mapping,
      "rlforge (ROLL's device_mapping): the reward model's world ranks (null: the actor's)");
  }
};

struct RlDataConfig {  // data
  std::optional<config::PathList> train_files;
  std::optional<config::PathList> val_files;
  std::string prompt_key = "prompt";
  std::string reward_fn_key = "data_source";
  std::optional<std::string> task;  // null: arith, when train_files is null
  YAML::Node task_kwargs;
  int64_t max_prompt_length = 512;
  int64_t max_response_length = 512;
  int64_t train_batch_size = 1024;
  int64_t val_size = 200;
  Truncation truncation = Truncation::error;
  bool filter_overlong_prompts = false;
  bool shuffle = true;
  std::optional<uint64_t> seed;

  template <class Fields>
  void fields(Fields& f) {
    f("train_files", train_files,
      "JSONL files in verl's columns, a path or a list (null: the built-in task); rl_prompt_source.h");
    f("val_files", val_files, "JSONL validation files, a path or a list, every row each validation");
    f("prompt_key", prompt_key, "the column of the prompt: a string, or a list of chat messages");
    f("reward_fn_key", reward_fn_key, "the column that picks the rule scorer (and groups val metrics)");
    f("task", task,
      "rlforge: built-in task (arith, reversal) when train_files is null (null: arith); its data_source is its name");
    f("task_kwargs", task_kwargs, "rlforge: task options, e.g. {digits: 3}");
    f("max_prompt_length", max_prompt_length, "max prompt tokens");
    f("max_response_length", max_response_length, "max response tokens");
    f("train_batch_size", train_batch_size, "prompts per step");
    f("val_size", val_size, "rlforge: held-out prompts per validation (built-in tasks)");
    f("truncation", truncation,
      "a prompt over max_prompt_length: error, left (keep its end), right (keep its start) or middle (keep both ends)");
    f("filter_overlong_prompts", filter_overlong_prompts,
      "drop the rows of train_files / val_files over max_prompt_length");
    f("shuffle", shuffle, "shuffle train_files' rows, each epoch in a new order");
    f("seed", seed, "seed of the data order (null: trainer seed 1)");
  }
  std::string builtin_task() const { return task.value_or("arith"); }
};

struct AlgorithmConfig {  // algorithm
  double gamma = 1.0;
  double lam = 1.0;
  std::string adv_estimator = "gae";
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  rl::KlPenalty kl_penalty = rl::KlPenalty::k1;
  rl::KlControlConfig kl_ctrl;

  template <class Fields>
  void fields(Fields& f) {
    f("gamma", gamma, "discount");
    f("lam", lam, "GAE lambda");
    f("adv_estimator", adv_estimator, "gae, grpo, reinforce_plus_plus, rloo, remax, grpo_passk, ...");
    f("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo, "GRPO: divide by the group's std (false: Dr.GRPO)");
    f("use_kl_in_reward", use_kl_in_reward, "subtract a KL penalty from the token rewards");
    f("kl_penalty", kl_penalty, "KL estimator in the reward: kl, abs, mse, low_var_kl");
    f("kl_ctrl", kl_ctrl, "KL-in-reward coefficient controller");
  }
};

struct RlTrainerConfig {  // trainer
  std::optional<int64_t> total_training_steps;
  std::string project_name = "verl_examples";
  std::string experiment_name = "gsm8k";
  std::vector<Logger> logger = {Logger::console, Logger::jsonl};
  int64_t nnodes = 1;
  int64_t n_gpus_per_node = 1;
  int64_t save_freq = -1;
  ResumeMode resume_mode = ResumeMode::automatic;
  std::optional<std::string> resume_from_path;
  bool val_before_train = true;
  int64_t test_freq = -1;
  int64_t critic_warmup = 0;
  std::optional<std::string> default_local_dir;  // null: checkpoints/<project_name>/<experiment_name>
  std::optional<int64_t> max_actor_ckpt_to_keep;
  std::optional<int64_t> max_critic_ckpt_to_keep;
  std::string device = "cpu";
  bool balance_batch = true;
  bool deterministic = false;
  int num_threads = 0;
  std::optional<double> time_budget_s;
  std::optional<std::string> rollout_data_dir, validation_data_dir;
  int64_t log_val_generations = 0;

  template <class Fields>
  void fields(Fields& f) {
    f("total_training_steps", total_training_steps, "steps of the run (null: epochs x batches per epoch)");
    f("project_name", project_name, "names the run folder");
    f("experiment_name", experiment_name, "names the run folder");
    f("logger", logger, "rlforge default [console, jsonl]: console and/or jsonl");
    f("nnodes", nnodes, "nodes (the MPI world decides; checked against it)");
    f("n_gpus_per_node", n_gpus_per_node, "rlforge default 1: ranks per node (the MPI world decides)");
    f("save_freq", save_freq, "checkpoint every k steps and at the end (<= 0: never)");
    f("resume_mode", resume_mode, "auto, disable or resume_path");
    f("resume_from_path", resume_from_path, "with resume_mode resume_path: a global_step_<k> folder");
    f("val_before_train", val_before_train, "validate before the first step");
    f("test_freq", test_freq, "validate every k steps and at the end (<= 0: never)");
    f("critic_warmup", critic_warmup,
      "the actor trains from step critic_warmup on (verl's critic_warmup <= global_steps): steps before it "
      "train the critic only");
    f("default_local_dir", default_local_dir,
      "run folder: checkpoints, metrics.jsonl, plot (null: checkpoints/<project_name>/<experiment_name>)");
    f("max_actor_ckpt_to_keep", max_actor_ckpt_to_keep, "keep the newest k checkpoints (null: all)");
    f("max_critic_ckpt_to_keep", max_critic_ckpt_to_keep,
      "with a critic: keep the newest k of its checkpoints (null: all); a step holds both roles, so it stays "
      "while either limit keeps it");
    f("device", device, "rlforge default cpu: the device (cpu)");
    f("balance_batch", balance_batch,
      "give each DP rank of a pass an equal number of responses with balanced token workloads (verl's "
      "balance_batch; rlforge balances inside each mini-batch, so DP never changes what a mini-batch holds)");
    f("deterministic", deterministic,
      "rlforge: fixed thread count and batch-invariant kernels on every path: same seed, same metrics");
    f("num_threads", num_threads,
      "rlforge: OpenMP threads per rank (0: cores / ranks; more than the cores are capped there, with a warning)");
    f("time_budget_s", time_budget_s, "rlforge: stop (after a validation and a checkpoint) once this many seconds ran");
    f("rollout_data_dir", rollout_data_dir,
      "write each step's responses to <dir>/<step>.jsonl: input, output, gts, score, step, reward extras (null: no)");
    f("validation_data_dir", validation_data_dir, "the same for each validation's responses (null: no)");
    f("log_val_generations", log_val_generations, "log the first k validation samples at each validation");
  }
};

struct ResourcesConfig {  // resources (DESIGN §9)
  double device_memory_gb = 4.0;
  bool enforce_device_memory = false;

  template <class Fields>
  void fields(Fields& f) {
    f("device_memory_gb", device_memory_gb,
      "rlforge: the device tier's budget per rank in GiB (the KV cache takes gpu_memory_utilization of it)");
    f("enforce_device_memory", enforce_device_memory,
      "rlforge: the memory tracker enforces device_memory_gb: an allocation on the device tier that would exceed it "
      "stops the run naming the category and sizes (false: it only sizes the KV cache). On the CPU the device tier "
      "is RAM like the host tier, so this is how a run shows it fits an accelerator of that size");
  }
};

struct CustomRewardFunctionSection {  // custom_reward_function: a user's verl-style reward file
  std::optional<std::string> path;
  YAML::Node reward_kwargs;  // a map of keyword arguments for the function (null: none)
  rl::PythonRewardConfig python;  // its keys spliced into this block (python_reward_pool.h)

  template <class Fields>
  void fields(Fields& f) {
    f("path", path, "a .py file defining the score function (null: the rule scorers by data_source)");
    python.fields(f);
    f("reward_kwargs", reward_kwargs, "extra keyword arguments passed to the function");
  }
  void validate() const { python.validate(); }
};

struct RlConfig {
  // Not an aggregate, for the same GCC 12 false positive as PolicyLossSection's (here on the strings of
  // ref.megatron when config::document's RlConfig{} is destroyed).
  RlConfig() = default;

  ActorRolloutRefSection actor_rollout_ref;
  CriticSection critic;
  RlDataConfig data;
  AlgorithmConfig algorithm;
  RlTrainerConfig trainer;
  ResourcesConfig resources;
  CustomRewardFunctionSection custom_reward_function;
  RewardModelSection reward_model;

  template <class Fields>
  void fields(Fields& f) {
    f("actor_rollout_ref", actor_rollout_ref, "actor, rollout and reference (the hybrid engine)");
    f("critic", critic, "the value model (built when algorithm.adv_estimator is gae, or critic.enable)");
    f("data", data, "prompts");
    f("algorithm", algorithm, "advantages and KL in the reward");
    f("trainer", trainer, "run length, validation, checkpoints, logging");
    f("resources", resources, "memory tiers");
    f("custom_reward_function", custom_reward_function, "a user's reward function in Python (verl's)");
    f("reward_model", reward_model, "a reward model scoring the training responses");
  }
  // Cross-section checks; ConfigError with the full key path.
  void validate() const;
  std::string run_dir() const;
  int64_t response_length() const;
  int64_t prompt_length() const;
  // verl's use_critic: critic.enable when set, else whether the estimator needs values (gae).
  bool uses_critic() const { return critic.enable.value_or(algorithm.adv_estimator == "gae"); }
  // The reference is built when a KL term needs its log-probs.
  bool uses_reference() const { return actor_rollout_ref.actor.loss.use_kl_loss || algorithm.use_kl_in_reward; }
  // The critic's keys that follow the actor's when null.
  std::string critic_model_path() const;
  int64_t critic_ppo_mini_batch_size() const;
  bool critic_use_dynamic_bsz() const;
  int64_t critic_ppo_epochs() const;
  bool critic_shuffle() const;
  uint64_t critic_data_loader_seed() const;
  rl::AggMode critic_loss_agg_mode() const;
  // reward_model.reward_manager dapo's overlong penalty (enable false otherwise).
  rl::OverlongBufferConfig overlong_buffer() const;
};

}  // namespace rf::rl
