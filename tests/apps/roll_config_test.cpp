// ROLL-style configs (apps/rlforge/roll_config.h): every row of the ROLL key table against the verl key
// it sets (values chosen unlike both defaults, so a row that did nothing would fail), ROLL's defaults
// where they differ from verl's, the ROLL combinations that have no verl counterpart, unknown keys with
// their "did you mean", ${key} references, device_mapping, the critic section (read only with gae, on
// actor_train's ranks) and the `rlforge:` extension block. A meta-test keeps every row of the table
// covered by one of these.
#include "apps/rlforge/roll_config.h"

#include <gtest/gtest.h>

#include <charconv>
#include <map>
#include <set>

#include "apps/rlforge/roll_config_keys.h"
#include "apps/rlforge/roll_translator.h"
#include "config/yaml_util.h"
#include "core/error.h"

namespace rf::apps {
namespace {

// The smallest ROLL file rlforge accepts: one rank, grpo, a response length.
constexpr char kBase[] = R"(
response_length: 8
adv_estimator: grpo
actor_train: {device_mapping: [0]}
actor_infer: {}
)";

// `into` with `extra`'s keys merged in (extra wins), recursively.
void merge_into(YAML::Node into, const YAML::Node& extra) {
  for (const std::string& key : config::map_keys(extra)) {
    const YAML::Node value = config::find_child(extra, key);
    YAML::Node existing = config::find_child(into, key);
    if (existing.IsMap() && value.IsMap())
      merge_into(existing, value);
    else
      into[key] = YAML::Clone(value);
  }
}

YAML::Node roll_doc(const std::string& extra) {
  YAML::Node doc = YAML::Load(kBase);
  if (!extra.empty()) merge_into(doc, YAML::Load(extra));
  return doc;
}

RollConfig translate(const std::string& extra) { return translate_roll_config(roll_doc(extra), "test.yaml"); }

// A tree's leaves by dotted key, as flow YAML.
std::map<std::string, std::string> leaves(const YAML::Node& node, const std::string& path = "") {
  std::map<std::string, std::string> out;
  if (!node.IsMap()) return {{path, config::flow_yaml(node)}};
  for (const std::string& key : config::map_keys(node))
    out.merge(leaves(config::find_child(node, key), path.empty() ? key : path + "." + key));
  return out;
}

YAML::Node verl_at(const RollConfig& config, const std::string& key) { return config::node_at_path(config.verl_tree, key); }

// The error translating `extra` throws (the test fails when there is none).
std::string error_of(const std::string& extra) {
  try {
    translate(extra);
  } catch (const ConfigError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a ConfigError for: " << extra;
  return "";
}

std::optional<double> number(const std::string& text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// `actual` is the YAML value written as `expected` (numbers compared as numbers).
::testing::AssertionResult same_value(const YAML::Node& actual, const std::string& expected) {
  if (!actual.IsDefined()) return ::testing::AssertionFailure() << "not set, expected " << expected;
  const std::string text = config::flow_yaml(actual);
  const auto x = number(text), y = number(expected);
  if ((x && y && *x == *y) || text == expected) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << text << ", expected " << expected;
}

// A gae run with `section` as its critic section (ROLL builds the critic only for gae, and rlforge's gae
// whitens, so whiten_advantages too), plus the top-level keys of the flow map `more` ("" none).
std::string with_critic(const std::string& section, const std::string& more = "") {
  return "{adv_estimator: gae, whiten_advantages: true, critic: " + section + (more.empty() ? "" : ", " + more) + "}";
}

// One row's translation: `roll` (YAML merged into kBase) sets `verl_key` to `expected`.
struct RowCase {
  std::string row;  // the table row this case covers
  std::string roll;
  std::string verl_key;
  std::string expected;
};

// Megatron's layer-split keys in a Megatron role's strategy_config (mcore_adapter passes them through): each
// lands in the role's megatron block as given, for actor_train, reference and the critic; and the recompute keys,
// for actor_train and the critic.
std::vector<RowCase> with_megatron_key_cases(std::vector<RowCase> cases) {
  const std::pair<std::string, std::string> keys[] = {{"num_layers_in_first_pipeline_stage", "3"},
                                                      {"num_layers_in_last_pipeline_stage", "5"},
                                                      {"account_for_embedding_in_pipeline_split", "true"},
                                                      {"account_for_loss_in_pipeline_split", "true"},
                                                      {"pipeline_model_parallel_layout", "Et|tL"},
                                                      {"microbatch_group_size_per_vp_stage", "4"}};
  for (const auto& [key, value] : keys) {
    const std::string section = "{strategy_args: {strategy_config: {" + key + ": " + value + "}}}";
    cases.push_back({"actor_train.strategy_args.strategy_config." + key, "actor_train: " + section,
                     "actor_rollout_ref.actor.megatron." + key, value});
    cases.push_back({"reference.strategy_args.strategy_config." + key, "reference: " + section,
                     "actor_rollout_ref.ref.megatron." + key, value});
    cases.push_back({"critic.strategy_args.strategy_config." + key, with_critic(section), "critic.megatron." + key, value});
  }
  // Megatron's activation recompute, for the roles that train.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"recompute_granularity", "full"},
           {"recompute_method", "block"},
           {"recompute_num_layers", "2"},
           {"recompute_modules", "[core_attn, mlp]"},
           {"distribute_saved_activations", "true"}}) {
    const std::string section = "{strategy_args: {strategy_config: {" + key + ": " + value + "}}}";
    cases.push_back({"actor_train.strategy_args.strategy_config." + key, "actor_train: " + section,
                     "actor_rollout_ref.actor.megatron." + key, value});
    cases.push_back({"critic.strategy_args.strategy_config." + key, with_critic(section), "critic.megatron." + key, value});
  }
  return cases;
}

const std::vector<RowCase>& row_cases() {
  static const std::vector<RowCase> cases = with_megatron_key_cases({
      // the run
      {"exp_name", "exp_name: run7", "trainer.experiment_name", "run7"},
      {"seed", "seed: 7", "actor_rollout_ref.actor.megatron.seed", "7"},
      {"seed", "seed: 7", "actor_rollout_ref.actor.data_loader_seed", "7"},
      {"output_dir", "output_dir: runs/a", "trainer.default_local_dir", "runs/a"},
      {"track_with", "track_with: stdout", "trainer.logger", "[console, jsonl]"},
      {"max_steps", "max_steps: 12", "trainer.total_training_steps", "12"},
      {"save_steps", "save_steps: 3", "trainer.save_freq", "3"},
      {"eval_steps", "{eval_steps: 5, validation: {}}", "trainer.test_freq", "5"},
      {"eval_steps", "{eval_steps: 5, validation: {}}", "trainer.val_before_train", "true"},
      {"eval_steps", "eval_steps: 5", "trainer.test_freq", "-1"},  // no validation role: never
      {"eval_steps", "eval_steps: 5", "trainer.val_before_train", "false"},
      {"max_ckpt_to_keep", "max_ckpt_to_keep: 3", "trainer.max_actor_ckpt_to_keep", "3"},
      {"max_ckpt_to_keep", "max_ckpt_to_keep: 0", "trainer.max_actor_ckpt_to_keep", "null"},
      {"resume_from_checkpoint", "resume_from_checkpoint: true", "trainer.resume_mode", "auto"},
      {"resume_from_checkpoint", "resume_from_checkpoint: false", "trainer.resume_mode", "disable"},
      {"resume_from_checkpoint", "resume_from_checkpoint: runs/a/global_step_4", "trainer.resume_mode", "resume_path"},
      {"resume_from_checkpoint", "resume_from_checkpoint: runs/a/global_step_4", "trainer.resume_from_path",
       "runs/a/global_step_4"},
      {"num_nodes", "num_nodes: 2", "trainer.nnodes", "2"},
      {"num_gpus_per_node", "num_gpus_per_node: 3", "trainer.n_gpus_per_node", "3"},
      {"is_offload_states", "is_offload_states: true", "actor_rollout_ref.actor.megatron.param_offload", "true"},
      {"is_offload_states", "is_offload_states: true", "actor_rollout_ref.actor.megatron.grad_offload", "true"},
      {"is_offload_states", "is_offload_states: true", "actor_rollout_ref.actor.megatron.optimizer_offload", "true"},
      {"is_offload_states", "is_offload_states: true", "actor_rollout_ref.ref.megatron.param_offload", "true"},
      // sizes
      {"rollout_batch_size", "rollout_batch_size: 32", "data.train_batch_size", "32"},
      {"num_return_sequences_in_group", "num_return_sequences_in_group: 4", "actor_rollout_ref.rollout.n", "4"},
      {"prompt_length", "prompt_length: 16", "data.max_prompt_length", "16"},
      {"response_length", "response_length: 9", "data.max_response_length", "9"},
      {"sequence_length", "{prompt_length: 16, sequence_length: 30, response_length: null}", "data.max_response_length",
       "14"},
      // models
      {"pretrain", "pretrain: models/a", "actor_rollout_ref.model.path", "models/a"},
      {"actor_train.model_args.model_name_or_path",
       "{actor_train: {model_args: {model_name_or_path: m}}, actor_infer: {model_args: {model_name_or_path: m}}, "
       "reference: {model_args: {model_name_or_path: m}}}",
       "actor_rollout_ref.model.path", "m"},
      {"actor_infer.model_args.model_name_or_path", "{pretrain: m, actor_infer: {model_args: {model_name_or_path: m}}}",
       "actor_rollout_ref.model.path", "m"},
      {"reference.model_args.model_name_or_path", "{pretrain: m, reference: {model_args: {model_name_or_path: m}}}",
       "actor_rollout_ref.model.path", "m"},
      // algorithm
      {"adv_estimator", "adv_estimator: grpo", "algorithm.adv_estimator", "grpo"},
      {"adv_estimator", "adv_estimator: grpo", "algorithm.norm_adv_by_std_in_grpo", "true"},
      {"norm_mean_type", "{adv_estimator: reinforce, norm_mean_type: group, norm_std_type: group}",
       "algorithm.adv_estimator", "grpo"},
      {"norm_std_type", "{adv_estimator: reinforce, norm_mean_type: group}", "algorithm.norm_adv_by_std_in_grpo",
       "false"},
      {"whiten_advantages", "{adv_estimator: reinforce, whiten_advantages: true}", "algorithm.adv_estimator",
       "reinforce_plus_plus"},
      {"gamma", "{adv_estimator: reinforce, whiten_advantages: true, gamma: 0.9}", "algorithm.gamma", "0.9"},
      {"lambd", "lambd: 0.5", "algorithm.lam", "0.5"},
      {"adv_estimator", with_critic("{}"), "algorithm.adv_estimator", "gae"},
      {"whiten_advantages", with_critic("{}"), "algorithm.adv_estimator", "gae"},
      {"gamma", with_critic("{}", "gamma: 0.99"), "algorithm.gamma", "0.99"},
      // ROLL's step 0 is verl's step 1: 4 critic-only steps are verl's steps 1-4, the actor from step 5.
      {"critic_warmup", "critic_warmup: 4", "trainer.critic_warmup", "5"},
      {"critic_warmup", "critic_warmup: 0", "trainer.critic_warmup", "0"},
      {"value_clip", with_critic("{}", "value_clip: 0.2"), "critic.cliprange_value", "0.2"},
      {"value_clip", with_critic("{}", "value_clip: 0.2"), "critic.loss_agg_mode", "seq-mean-token-mean"},
      {"value_clip", with_critic("{}", "value_clip: null"), "critic.cliprange_value", "1.7976931348623157e+308"},
      {"add_token_level_kl", "{adv_estimator: reinforce, whiten_advantages: true, add_token_level_kl: true}",
       "algorithm.use_kl_in_reward", "true"},
      {"kl_penalty", "kl_penalty: mse", "algorithm.kl_penalty", "mse"},
      {"init_kl_coef", "init_kl_coef: 0.05", "algorithm.kl_ctrl.kl_coef", "0.05"},
      {"target_kl", "target_kl: 0.02", "algorithm.kl_ctrl.type", "adaptive"},
      {"target_kl", "target_kl: 0.02", "algorithm.kl_ctrl.target_kl", "0.02"},
      {"target_kl", "target_kl: null", "algorithm.kl_ctrl.type", "fixed"},
      {"kl_horizon", "kl_horizon: 500", "algorithm.kl_ctrl.horizon", "500"},
      {"ppo_epochs", "ppo_epochs: 2", "actor_rollout_ref.actor.ppo_epochs", "2"},
      {"ppo_epochs", with_critic("{}", "ppo_epochs: 2"), "critic.ppo_epochs", "1"},  // ROLL's critic: one pass
      {"pg_clip", "pg_clip: 0.3", "actor_rollout_ref.actor.clip_ratio", "0.3"},
      {"pg_clip", "pg_clip: 0.3", "actor_rollout_ref.actor.clip_ratio_low", "0.3"},
      {"pg_clip", "pg_clip: 0.3", "actor_rollout_ref.actor.clip_ratio_high", "0.3"},
      {"use_pg_clip_range", "{use_pg_clip_range: true, pg_clip_low: 0.1, pg_clip_high: 0.28}",
       "actor_rollout_ref.actor.clip_ratio_high", "0.28"},
      {"pg_clip_low", "{use_pg_clip_range: true, pg_clip_low: 0.1}", "actor_rollout_ref.actor.clip_ratio_low", "0.1"},
      {"pg_clip_high", "{use_pg_clip_range: true, pg_clip_high: 0.4}", "actor_rollout_ref.actor.clip_ratio_high",
       "0.4"},
      {"pg_clip_low", "pg_clip_low: 0.1", "actor_rollout_ref.actor.clip_ratio_low", "0.2"},  // ignored without range
      {"dual_clip_loss", "{dual_clip_loss: true, pg_clip: 0.25}", "actor_rollout_ref.actor.clip_ratio_c", "1.5"},
      {"dual_clip_loss", "dual_clip_loss: false", "actor_rollout_ref.actor.clip_ratio_c",
       "1.7976931348623157e+308"},
      {"loss_agg_mode", "loss_agg_mode: seq-mean-token-sum", "actor_rollout_ref.actor.loss_agg_mode",
       "seq-mean-token-sum"},
      {"use_kl_loss", "use_kl_loss: true", "actor_rollout_ref.actor.use_kl_loss", "true"},
      {"use_kl_loss", "use_kl_loss: true", "actor_rollout_ref.actor.kl_loss_type", "low_var_kl"},
      {"kl_loss_coef", "kl_loss_coef: 0.002", "actor_rollout_ref.actor.kl_loss_coef", "0.002"},
      {"entropy_loss_coef", "entropy_loss_coef: 0.01", "actor_rollout_ref.actor.entropy_coeff", "0.01"},
      // actor_train
      {"actor_train.model_args.dtype", "actor_train: {model_args: {dtype: fp32}}",
       "actor_rollout_ref.actor.megatron.dtype", "float32"},
      {"actor_train.router_replay.mode", "actor_train: {router_replay: {mode: R3}}",
       "actor_rollout_ref.actor.router_replay.mode", "R3"},
      {"actor_train.training_args.learning_rate", "actor_train: {training_args: {learning_rate: 3.0e-4}}",
       "actor_rollout_ref.actor.optim.lr", "0.0003"},
      {"actor_train.training_args.weight_decay", "actor_train: {training_args: {weight_decay: 0.1}}",
       "actor_rollout_ref.actor.optim.weight_decay", "0.1"},
      {"actor_train.training_args.adam_beta1", "actor_train: {training_args: {adam_beta1: 0.8}}",
       "actor_rollout_ref.actor.optim.betas", "[0.8, 0.999]"},
      {"actor_train.training_args.adam_beta2", "actor_train: {training_args: {adam_beta2: 0.95}}",
       "actor_rollout_ref.actor.optim.betas", "[0.9, 0.95]"},
      {"actor_train.training_args.lr_scheduler_type", "actor_train: {training_args: {lr_scheduler_type: cosine}}",
       "actor_rollout_ref.actor.optim.lr_decay_style", "cosine"},
      {"actor_train.training_args.lr_scheduler_type",
       "actor_train: {training_args: {lr_scheduler_type: constant_with_warmup}}",
       "actor_rollout_ref.actor.optim.lr_decay_style", "constant"},
      {"actor_train.training_args.lr_scheduler_type",
       "actor_train: {training_args: {lr_scheduler_type: cosine_with_min_lr}}",
       "actor_rollout_ref.actor.optim.lr_decay_style", "cosine"},
      // 64 prompts x 8 = 512 responses, 128 per optimizer step: K = 4 optimizer steps per RL step.
      {"actor_train.training_args.warmup_steps",
       "{rollout_batch_size: 64, num_return_sequences_in_group: 8, actor_train: {training_args: {warmup_steps: 80, "
       "per_device_train_batch_size: 128}}}",
       "actor_rollout_ref.actor.optim.lr_warmup_steps", "20"},
      {"actor_train.training_args.warmup_steps",
       "{rollout_batch_size: 64, num_return_sequences_in_group: 8, ppo_epochs: 2, actor_train: {training_args: "
       "{warmup_steps: 10, per_device_train_batch_size: 128}}}",
       "actor_rollout_ref.actor.optim.lr_warmup_steps", "2"},  // K = 8: ceil(10 / 8)
      {"actor_train.training_args.warmup_ratio", "actor_train: {training_args: {warmup_ratio: 0.1}}",
       "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "0.1"},
      // Two ranks, TP 1: dp 2; 4 per device x 2 accumulated x 2 = 16 responses = 2 prompts of 8.
      {"actor_train.training_args.per_device_train_batch_size",
       "{num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1], "
       "training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}}}",
       "actor_rollout_ref.actor.ppo_mini_batch_size", "2"},
      {"actor_train.training_args.per_device_train_batch_size",
       "{num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1], "
       "training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}}}",
       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4"},
      // TP 2 on the same two ranks: dp 1, so the same step is 8 responses = 1 prompt.
      {"actor_train.training_args.gradient_accumulation_steps",
       "{num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1], "
       "training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}, strategy_args: "
       "{strategy_config: {tensor_model_parallel_size: 2}}}}",
       "actor_rollout_ref.actor.ppo_mini_batch_size", "1"},
      {"actor_train.strategy_args.strategy_name", "actor_train: {strategy_args: {strategy_name: megatron_train}}",
       "actor_rollout_ref.actor.strategy", "megatron"},
      {"actor_train.strategy_args.strategy_name", "actor_train: {strategy_args: {strategy_name: rlforge}}",
       "actor_rollout_ref.actor.strategy", "megatron"},
      {"actor_train.strategy_args.strategy_config.tensor_model_parallel_size",
       "actor_train: {device_mapping: [0, 1], strategy_args: {strategy_config: {tensor_model_parallel_size: 2}}}",
       "actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "2"},
      {"actor_train.strategy_args.strategy_config.pipeline_model_parallel_size",
       "actor_train: {device_mapping: [0, 1], strategy_args: {strategy_config: {pipeline_model_parallel_size: 2}}}",
       "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", "2"},
      {"actor_train.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
       "actor_train: {device_mapping: [0, 1], strategy_args: {strategy_config: {pipeline_model_parallel_size: 2, "
       "virtual_pipeline_model_parallel_size: 8}}}",
       "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size", "8"},
      {"actor_train.strategy_args.strategy_config.context_parallel_size",
       "actor_train: {device_mapping: [0, 1], strategy_args: {strategy_config: {context_parallel_size: 2}}}",
       "actor_rollout_ref.actor.megatron.context_parallel_size", "2"},
      {"actor_train.strategy_args.strategy_config.expert_model_parallel_size",
       "actor_train: {strategy_args: {strategy_config: {expert_model_parallel_size: 2}}}",
       "actor_rollout_ref.actor.megatron.expert_model_parallel_size", "2"},
      {"actor_train.strategy_args.strategy_config.expert_tensor_parallel_size",
       "actor_train: {strategy_args: {strategy_config: {expert_tensor_parallel_size: 2}}}",
       "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size", "2"},
      {"actor_train.strategy_args.strategy_config.moe_token_dispatcher_type",
       "actor_train: {strategy_args: {strategy_config: {moe_token_dispatcher_type: alltoall}}}",
       "actor_rollout_ref.actor.megatron.moe_token_dispatcher_type", "alltoall"},
      {"actor_train.strategy_args.strategy_config.moe_grouped_gemm",
       "actor_train: {strategy_args: {strategy_config: {moe_grouped_gemm: false}}}",
       "actor_rollout_ref.actor.megatron.moe_grouped_gemm", "false"},
      {"actor_train.strategy_args.strategy_config.moe_layer_recompute",
       "actor_train: {strategy_args: {strategy_config: {moe_layer_recompute: true}}}",
       "actor_rollout_ref.actor.megatron.moe_layer_recompute", "true"},
      {"actor_train.strategy_args.strategy_config.moe_shared_expert_overlap",
       "actor_train: {strategy_args: {strategy_config: {moe_shared_expert_overlap: false}}}",
       "actor_rollout_ref.actor.megatron.moe_shared_expert_overlap", "false"},
      {"actor_train.strategy_args.strategy_config.moe_router_load_balancing_type",
       "actor_train: {strategy_args: {strategy_config: {moe_router_load_balancing_type: seq_aux_loss}}}",
       "actor_rollout_ref.actor.megatron.moe_router_load_balancing_type", "seq_aux_loss"},
      {"actor_train.strategy_args.strategy_config.moe_aux_loss_coeff",
       "actor_train: {strategy_args: {strategy_config: {moe_aux_loss_coeff: 0.01}}}",
       "actor_rollout_ref.actor.megatron.moe_aux_loss_coeff", "0.01"},
      {"actor_train.strategy_args.strategy_config.moe_z_loss_coeff",
       "actor_train: {strategy_args: {strategy_config: {moe_z_loss_coeff: 0.001}}}",
       "actor_rollout_ref.actor.megatron.moe_z_loss_coeff", "0.001"},
      {"actor_train.strategy_args.strategy_config.moe_expert_capacity_factor",
       "actor_train: {strategy_args: {strategy_config: {moe_expert_capacity_factor: 1.5}}}",
       "actor_rollout_ref.actor.megatron.moe_expert_capacity_factor", "1.5"},
      {"actor_train.strategy_args.strategy_config.moe_token_drop_policy",
       "actor_train: {strategy_args: {strategy_config: {moe_token_drop_policy: position}}}",
       "actor_rollout_ref.actor.megatron.moe_token_drop_policy", "position"},
      {"actor_train.strategy_args.strategy_config.moe_pad_expert_input_to_capacity",
       "actor_train: {strategy_args: {strategy_config: {moe_pad_expert_input_to_capacity: true}}}",
       "actor_rollout_ref.actor.megatron.moe_pad_expert_input_to_capacity", "true"},
      {"actor_train.model_args.moe_aux_loss_coef", "actor_train: {model_args: {moe_aux_loss_coef: 0.02}}",
       "actor_rollout_ref.actor.megatron.moe_aux_loss_coeff", "0.02"},
      {"actor_train.strategy_args.strategy_config.sequence_parallel",
       "actor_train: {strategy_args: {strategy_config: {sequence_parallel: true}}}",
       "actor_rollout_ref.actor.megatron.sequence_parallel", "true"},
      {"actor_train.strategy_args.strategy_config.use_distributed_optimizer",
       "actor_train: {strategy_args: {strategy_config: {use_distributed_optimizer: true}}}",
       "actor_rollout_ref.actor.megatron.use_distributed_optimizer", "true"},
      {"actor_train.strategy_args.strategy_config.overlap_grad_reduce",
       "actor_train: {strategy_args: {strategy_config: {overlap_grad_reduce: true}}}",
       "actor_rollout_ref.actor.megatron.overlap_grad_reduce", "true"},
      {"actor_train.strategy_args.strategy_config.overlap_param_gather",
       "actor_train: {strategy_args: {strategy_config: {overlap_param_gather: true}}}",
       "actor_rollout_ref.actor.megatron.overlap_param_gather", "true"},
      {"actor_train.strategy_args.strategy_config.max_grad_norm",
       "actor_train: {strategy_args: {strategy_config: {max_grad_norm: 0.5}}}",
       "actor_rollout_ref.actor.optim.clip_grad", "0.5"},
      {"actor_train.strategy_args.strategy_config.adam_epsilon",
       "actor_train: {strategy_args: {strategy_config: {adam_epsilon: 1.0e-6}}}", "actor_rollout_ref.actor.optim.eps",
       "1e-06"},
      {"actor_train.strategy_args.strategy_config.lr_scheduler_kwargs.min_lr",
       "actor_train: {strategy_args: {strategy_config: {lr_scheduler_kwargs: {min_lr: 3.0e-5}}}}",
       "actor_rollout_ref.actor.optim.min_lr", "3e-05"},
      {"actor_train.infer_batch_size", "actor_train: {infer_batch_size: 32}",
       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "32"},
      // actor_infer
      {"actor_infer.model_args.dtype", "actor_infer: {model_args: {dtype: fp32}}", "actor_rollout_ref.rollout.dtype",
       "float32"},
      {"actor_infer.generating_args.temperature", "actor_infer: {generating_args: {temperature: 0.6}}",
       "actor_rollout_ref.rollout.temperature", "0.6"},
      {"actor_infer.generating_args.top_p", "actor_infer: {generating_args: {top_p: 0.9}}",
       "actor_rollout_ref.rollout.top_p", "0.9"},
      {"actor_infer.generating_args.top_k", "actor_infer: {generating_args: {top_k: 20}}",
       "actor_rollout_ref.rollout.top_k", "20"},
      {"actor_infer.generating_args.top_k", "actor_infer: {generating_args: {top_k: 0}}",
       "actor_rollout_ref.rollout.top_k", "-1"},
      {"actor_infer.generating_args.do_sample", "actor_infer: {generating_args: {do_sample: false}}",
       "actor_rollout_ref.rollout.do_sample", "false"},
      {"actor_infer.strategy_args.strategy_name", "actor_infer: {strategy_args: {strategy_name: rlforge}}",
       "actor_rollout_ref.rollout.name", "rlforge"},
      {"actor_infer.strategy_args.strategy_config.tensor_parallel_size",
       "actor_infer: {strategy_args: {strategy_config: {tensor_parallel_size: 2}}}",
       "actor_rollout_ref.rollout.tensor_model_parallel_size", "2"},
      {"actor_infer.strategy_args.strategy_config.gpu_memory_utilization",
       "actor_infer: {strategy_args: {strategy_config: {gpu_memory_utilization: 0.3}}}",
       "actor_rollout_ref.rollout.gpu_memory_utilization", "0.3"},
      {"actor_infer.strategy_args.strategy_config.kv_cache_bytes",
       "actor_infer: {strategy_args: {strategy_config: {kv_cache_bytes: 4096}}}",
       "actor_rollout_ref.rollout.kv_cache_bytes", "4096"},
      {"actor_infer.strategy_args.strategy_config.block_size",
       "actor_infer: {strategy_args: {strategy_config: {block_size: 8}}}", "actor_rollout_ref.rollout.block_size", "8"},
      {"actor_infer.strategy_args.strategy_config.max_num_seqs",
       "actor_infer: {strategy_args: {strategy_config: {max_num_seqs: 7}}}", "actor_rollout_ref.rollout.max_num_seqs",
       "7"},
      {"actor_infer.strategy_args.strategy_config.max_num_batched_tokens",
       "actor_infer: {strategy_args: {strategy_config: {max_num_batched_tokens: 99}}}",
       "actor_rollout_ref.rollout.max_num_batched_tokens", "99"},
      {"actor_infer.strategy_args.strategy_config.enable_prefix_caching",
       "actor_infer: {strategy_args: {strategy_config: {enable_prefix_caching: false}}}",
       "actor_rollout_ref.rollout.enable_prefix_caching", "false"},
      {"actor_infer.strategy_args.strategy_config.enable_chunked_prefill",
       "actor_infer: {strategy_args: {strategy_config: {enable_chunked_prefill: false}}}",
       "actor_rollout_ref.rollout.enable_chunked_prefill", "false"},
      // reference
      {"reference.model_args.dtype", "reference: {model_args: {dtype: fp32}}", "actor_rollout_ref.ref.megatron.dtype",
       "float32"},
      {"reference.strategy_args.strategy_name", "reference: {strategy_args: {strategy_name: megatron_infer}}",
       "actor_rollout_ref.ref.strategy", "megatron"},
      {"reference.strategy_args.strategy_config.tensor_model_parallel_size",
       "reference: {strategy_args: {strategy_config: {tensor_model_parallel_size: 3}}}",
       "actor_rollout_ref.ref.megatron.tensor_model_parallel_size", "3"},
      {"reference.strategy_args.strategy_config.pipeline_model_parallel_size",
       "reference: {strategy_args: {strategy_config: {pipeline_model_parallel_size: 2}}}",
       "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size", "2"},
      {"reference.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
       "reference: {strategy_args: {strategy_config: {virtual_pipeline_model_parallel_size: 2}}}",
       "actor_rollout_ref.ref.megatron.virtual_pipeline_model_parallel_size", "2"},
      {"reference.strategy_args.strategy_config.context_parallel_size",
       "reference: {strategy_args: {strategy_config: {context_parallel_size: 2}}}",
       "actor_rollout_ref.ref.megatron.context_parallel_size", "2"},
      {"reference.strategy_args.strategy_config.expert_model_parallel_size",
       "reference: {strategy_args: {strategy_config: {expert_model_parallel_size: 2}}}",
       "actor_rollout_ref.ref.megatron.expert_model_parallel_size", "2"},
      {"reference.strategy_args.strategy_config.expert_tensor_parallel_size",
       "reference: {strategy_args: {strategy_config: {expert_tensor_parallel_size: 1}}}",
       "actor_rollout_ref.ref.megatron.expert_tensor_parallel_size", "1"},
      {"reference.strategy_args.strategy_config.moe_token_dispatcher_type",
       "reference: {strategy_args: {strategy_config: {moe_token_dispatcher_type: alltoall}}}",
       "actor_rollout_ref.ref.megatron.moe_token_dispatcher_type", "alltoall"},
      {"reference.strategy_args.strategy_config.moe_grouped_gemm",
       "reference: {strategy_args: {strategy_config: {moe_grouped_gemm: false}}}",
       "actor_rollout_ref.ref.megatron.moe_grouped_gemm", "false"},
      {"reference.strategy_args.strategy_config.moe_layer_recompute",
       "reference: {strategy_args: {strategy_config: {moe_layer_recompute: true}}}",
       "actor_rollout_ref.ref.megatron.moe_layer_recompute", "true"},
      {"reference.strategy_args.strategy_config.moe_shared_expert_overlap",
       "reference: {strategy_args: {strategy_config: {moe_shared_expert_overlap: false}}}",
       "actor_rollout_ref.ref.megatron.moe_shared_expert_overlap", "false"},
      {"reference.strategy_args.strategy_config.moe_router_load_balancing_type",
       "reference: {strategy_args: {strategy_config: {moe_router_load_balancing_type: seq_aux_loss}}}",
       "actor_rollout_ref.ref.megatron.moe_router_load_balancing_type", "seq_aux_loss"},
      {"reference.strategy_args.strategy_config.moe_aux_loss_coeff",
       "reference: {strategy_args: {strategy_config: {moe_aux_loss_coeff: 0.01}}}",
       "actor_rollout_ref.ref.megatron.moe_aux_loss_coeff", "0.01"},
      {"reference.strategy_args.strategy_config.moe_z_loss_coeff",
       "reference: {strategy_args: {strategy_config: {moe_z_loss_coeff: 0.001}}}",
       "actor_rollout_ref.ref.megatron.moe_z_loss_coeff", "0.001"},
      {"reference.strategy_args.strategy_config.moe_expert_capacity_factor",
       "reference: {strategy_args: {strategy_config: {moe_expert_capacity_factor: 1.5}}}",
       "actor_rollout_ref.ref.megatron.moe_expert_capacity_factor", "1.5"},
      {"reference.strategy_args.strategy_config.moe_token_drop_policy",
       "reference: {strategy_args: {strategy_config: {moe_token_drop_policy: position}}}",
       "actor_rollout_ref.ref.megatron.moe_token_drop_policy", "position"},
      {"reference.strategy_args.strategy_config.moe_pad_expert_input_to_capacity",
       "reference: {strategy_args: {strategy_config: {moe_pad_expert_input_to_capacity: true}}}",
       "actor_rollout_ref.ref.megatron.moe_pad_expert_input_to_capacity", "true"},
      {"reference.strategy_args.strategy_config.sequence_parallel",
       "reference: {strategy_args: {strategy_config: {sequence_parallel: true}}}",
       "actor_rollout_ref.ref.megatron.sequence_parallel", "true"},
      {"reference.infer_batch_size", "reference: {infer_batch_size: 24}",
       "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "24"},
      // critic
      {"critic.model_args.model_name_or_path", with_critic("{model_args: {model_name_or_path: v}}"),
       "critic.model.path", "v"},
      {"reward_pretrain", with_critic("{}", "reward_pretrain: rm"), "critic.model.path", "rm"},
      {"critic.model_args.model_name_or_path",
       with_critic("{model_args: {model_name_or_path: v}}", "reward_pretrain: rm"), "critic.model.path", "v"},
      {"critic.model_args.dtype", with_critic("{model_args: {dtype: fp32}}"), "critic.megatron.dtype", "float32"},
      {"critic.training_args.learning_rate", with_critic("{training_args: {learning_rate: 2.0e-3}}"),
       "critic.optim.lr", "0.002"},
      {"critic.training_args.weight_decay", with_critic("{training_args: {weight_decay: 0.1}}"),
       "critic.optim.weight_decay", "0.1"},
      {"critic.training_args.adam_beta1", with_critic("{training_args: {adam_beta1: 0.8}}"), "critic.optim.betas",
       "[0.8, 0.999]"},
      {"critic.training_args.adam_beta2", with_critic("{training_args: {adam_beta2: 0.95}}"), "critic.optim.betas",
       "[0.9, 0.95]"},
      {"critic.training_args.lr_scheduler_type", with_critic("{training_args: {lr_scheduler_type: cosine}}"),
       "critic.optim.lr_decay_style", "cosine"},
      {"critic.training_args.lr_scheduler_type",
       with_critic("{training_args: {lr_scheduler_type: constant_with_warmup}}"), "critic.optim.lr_decay_style",
       "constant"},
      // 64 prompts x 8 = 512 responses, 128 per critic optimizer step: K = 4, and with ppo_epochs 2 still 4
      // (the critic's one pass): ceil(10 / 4) = 3 where the actor's would be ceil(10 / 8) = 2.
      {"critic.training_args.warmup_steps",
       with_critic("{training_args: {warmup_steps: 80, per_device_train_batch_size: 128}}",
                   "rollout_batch_size: 64, num_return_sequences_in_group: 8"),
       "critic.optim.lr_warmup_steps", "20"},
      {"critic.training_args.warmup_steps",
       with_critic("{training_args: {warmup_steps: 10, per_device_train_batch_size: 128}}",
                   "rollout_batch_size: 64, num_return_sequences_in_group: 8, ppo_epochs: 2"),
       "critic.optim.lr_warmup_steps", "3"},
      {"critic.training_args.warmup_ratio", with_critic("{training_args: {warmup_ratio: 0.1}}"),
       "critic.optim.lr_warmup_steps_ratio", "0.1"},
      // On actor_train's two ranks, TP 1: dp 2; 4 per device x 2 accumulated x 2 = 16 responses = 2 prompts of 8.
      {"critic.training_args.per_device_train_batch_size",
       with_critic("{training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}}",
                   "num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1]}"),
       "critic.ppo_mini_batch_size", "2"},
      {"critic.training_args.per_device_train_batch_size",
       with_critic("{training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}}",
                   "num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1]}"),
       "critic.ppo_micro_batch_size_per_gpu", "4"},
      // The critic's own TP 2 on the same two ranks: dp 1, so its step is 8 responses = 1 prompt.
      {"critic.training_args.gradient_accumulation_steps",
       with_critic("{training_args: {per_device_train_batch_size: 4, gradient_accumulation_steps: 2}, strategy_args: "
                   "{strategy_config: {tensor_model_parallel_size: 2}}}",
                   "num_return_sequences_in_group: 8, rollout_batch_size: 4, actor_train: {device_mapping: [0, 1]}"),
       "critic.ppo_mini_batch_size", "1"},
      {"critic.strategy_args.strategy_name", with_critic("{strategy_args: {strategy_name: megatron_train}}"),
       "critic.strategy", "megatron"},
      {"critic.strategy_args.strategy_config.tensor_model_parallel_size",
       with_critic("{strategy_args: {strategy_config: {tensor_model_parallel_size: 2}}}",
                   "actor_train: {device_mapping: [0, 1]}"),
       "critic.megatron.tensor_model_parallel_size", "2"},
      {"critic.strategy_args.strategy_config.pipeline_model_parallel_size",
       with_critic("{strategy_args: {strategy_config: {pipeline_model_parallel_size: 2}}}",
                   "actor_train: {device_mapping: [0, 1]}"),
       "critic.megatron.pipeline_model_parallel_size", "2"},
      {"critic.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
       with_critic("{strategy_args: {strategy_config: {virtual_pipeline_model_parallel_size: 2}}}",
                   "actor_train: {device_mapping: [0, 1]}"),
       "critic.megatron.virtual_pipeline_model_parallel_size", "2"},
      {"critic.strategy_args.strategy_config.context_parallel_size",
       with_critic("{strategy_args: {strategy_config: {context_parallel_size: 2}}}",
                   "actor_train: {device_mapping: [0, 1]}"),
       "critic.megatron.context_parallel_size", "2"},
      {"critic.strategy_args.strategy_config.expert_model_parallel_size",
       with_critic("{strategy_args: {strategy_config: {expert_model_parallel_size: 2}}}"),
       "critic.megatron.expert_model_parallel_size", "2"},
      {"critic.strategy_args.strategy_config.sequence_parallel",
       with_critic("{strategy_args: {strategy_config: {sequence_parallel: true}}}"),
       "critic.megatron.sequence_parallel", "true"},
      {"critic.strategy_args.strategy_config.use_distributed_optimizer",
       with_critic("{strategy_args: {strategy_config: {use_distributed_optimizer: true}}}"),
       "critic.megatron.use_distributed_optimizer", "true"},
      {"critic.strategy_args.strategy_config.overlap_grad_reduce",
       with_critic("{strategy_args: {strategy_config: {overlap_grad_reduce: true}}}"),
       "critic.megatron.overlap_grad_reduce", "true"},
      {"critic.strategy_args.strategy_config.overlap_param_gather",
       with_critic("{strategy_args: {strategy_config: {overlap_param_gather: true}}}"),
       "critic.megatron.overlap_param_gather", "true"},
      {"critic.strategy_args.strategy_config.max_grad_norm",
       with_critic("{strategy_args: {strategy_config: {max_grad_norm: 0.5}}}"), "critic.optim.clip_grad", "0.5"},
      {"critic.strategy_args.strategy_config.adam_epsilon",
       with_critic("{strategy_args: {strategy_config: {adam_epsilon: 1.0e-6}}}"), "critic.optim.eps", "1e-06"},
      {"critic.strategy_args.strategy_config.lr_scheduler_kwargs.min_lr",
       with_critic("{strategy_args: {strategy_config: {lr_scheduler_kwargs: {min_lr: 3.0e-5}}}}"),
       "critic.optim.min_lr", "3e-05"},
      // validation
      {"validation.generating_args.temperature", "validation: {generating_args: {temperature: 0.0}}",
       "actor_rollout_ref.rollout.val_kwargs.temperature", "0"},
      {"validation.generating_args.top_p", "validation: {generating_args: {top_p: 0.5}}",
       "actor_rollout_ref.rollout.val_kwargs.top_p", "0.5"},
      {"validation.generating_args.top_k", "validation: {generating_args: {top_k: -1}}",
       "actor_rollout_ref.rollout.val_kwargs.top_k", "-1"},
      {"validation.generating_args.do_sample", "validation: {generating_args: {do_sample: false}}",
       "actor_rollout_ref.rollout.val_kwargs.do_sample", "false"},
      {"validation.generating_args.num_return_sequences", "validation: {generating_args: {num_return_sequences: 4}}",
       "actor_rollout_ref.rollout.val_kwargs.n", "4"},
      // rlforge's block
      {"rlforge", "rlforge: {data: {task: arith, task_kwargs: {digits: 2}}, trainer: {deterministic: true}}",
       "data.task_kwargs", "{digits: 2}"},
      {"rlforge", "rlforge: {data: {task: arith, task_kwargs: {digits: 2}}, trainer: {deterministic: true}}",
       "trainer.deterministic", "true"},
  });
  return cases;
}

TEST(RollConfig, EveryRowSetsItsVerlKey) {
  for (const RowCase& c : row_cases()) {
    SCOPED_TRACE(c.row + " <- " + c.roll);
    EXPECT_NE(find_roll_key(c.row), nullptr) << "no such row";
    EXPECT_TRUE(same_value(verl_at(translate(c.roll), c.verl_key), c.expected)) << c.verl_key;
  }
}

// ROLL's dataclass defaults where they differ from verl's: a ROLL file means ROLL's.
TEST(RollConfig, AbsentKeysTakeRollsDefaults) {
  const RollConfig config = translate("");
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"actor_rollout_ref.actor.loss_agg_mode", "seq-mean-token-mean"},
      {"actor_rollout_ref.actor.kl_loss_coef", "0"},
      {"actor_rollout_ref.actor.clip_ratio_c", "1.7976931348623157e+308"},
      {"actor_rollout_ref.actor.optim.lr", "5e-05"},
      {"actor_rollout_ref.actor.optim.weight_decay", "0"},
      {"actor_rollout_ref.actor.optim.lr_decay_style", "linear"},
      {"actor_rollout_ref.actor.megatron.dtype", "bfloat16"},
      {"actor_rollout_ref.actor.megatron.seed", "42"},
      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "8"},
      {"actor_rollout_ref.actor.ppo_mini_batch_size", "8"},
      {"actor_rollout_ref.rollout.dtype", "bfloat16"},
      {"actor_rollout_ref.rollout.temperature", "0.95"},
      {"actor_rollout_ref.rollout.top_p", "0.7"},
      {"actor_rollout_ref.rollout.top_k", "50"},
      {"actor_rollout_ref.rollout.n", "1"},
      {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "16"},
      {"algorithm.lam", "0.95"},
      {"algorithm.kl_ctrl.kl_coef", "0.2"},
      {"data.train_batch_size", "128"},
      {"data.max_prompt_length", "1024"},
      {"trainer.total_training_steps", "500"},
      {"trainer.save_freq", "50"},
      {"trainer.default_local_dir", "./output"},
      {"trainer.resume_mode", "disable"},
  };
  for (const auto& [key, expected] : defaults) EXPECT_TRUE(same_value(verl_at(config, key), expected)) << key;
  // Without a reference section the reference follows the actor (train_command's ref_follows_actor), and
  // without a validation section no validation-sampling key is written.
  EXPECT_FALSE(verl_at(config, "actor_rollout_ref.ref").IsDefined());
  EXPECT_FALSE(verl_at(config, "actor_rollout_ref.rollout.val_kwargs").IsDefined());
  // A role's defaults apply once the file has the role.
  EXPECT_TRUE(same_value(verl_at(translate("reference: {}"), "actor_rollout_ref.ref.megatron.dtype"), "bfloat16"));
  EXPECT_TRUE(same_value(verl_at(translate("validation: {}"), "actor_rollout_ref.rollout.val_kwargs.top_k"), "50"));
}

// A critic section is ROLL's worker with ROLL's defaults, not verl's nulls that follow the actor: here
// the actor is fp32 at TP 2 with ZeRO-1, a custom learning rate, loss_agg_mode and ppo_epochs, and the
// critic keeps bf16, TP 1, no ZeRO-1, ROLL's optimizer, one pass and its own loss aggregation.
TEST(RollConfig, ACriticSectionTakesRollsDefaultsNotTheActors) {
  const RollConfig config = translate(with_critic(
      "{}", "actor_train: {device_mapping: [0, 1], model_args: {dtype: fp32}, training_args: {learning_rate: "
            "1.0e-3}, strategy_args: {strategy_config: {tensor_model_parallel_size: 2, use_distributed_optimizer: "
            "true}}}, loss_agg_mode: token-mean, ppo_epochs: 2"));
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"critic.optim.lr", "5e-05"},
      {"critic.optim.weight_decay", "0"},
      {"critic.optim.betas", "[0.9, 0.999]"},
      {"critic.optim.lr_decay_style", "linear"},
      {"critic.optim.lr_warmup_steps", "0"},
      {"critic.megatron.dtype", "bfloat16"},
      {"critic.megatron.tensor_model_parallel_size", "1"},
      {"critic.megatron.pipeline_model_parallel_size", "1"},
      {"critic.megatron.context_parallel_size", "1"},
      {"critic.megatron.expert_model_parallel_size", "1"},
      {"critic.megatron.sequence_parallel", "false"},
      {"critic.megatron.use_distributed_optimizer", "false"},
      {"critic.megatron.overlap_grad_reduce", "false"},
      {"critic.megatron.overlap_param_gather", "false"},
      // 8 per device on dp 2 (TP 1 on the actor's two ranks): 16 responses per optimizer step.
      {"critic.ppo_micro_batch_size_per_gpu", "8"},
      {"critic.ppo_mini_batch_size", "16"},
      {"critic.ppo_epochs", "1"},
      {"critic.cliprange_value", "1.7976931348623157e+308"},  // ROLL's value_clip null: no clip
      {"critic.loss_agg_mode", "seq-mean-token-mean"},
      {"trainer.critic_warmup", "0"},
      {"algorithm.lam", "0.95"},
  };
  for (const auto& [key, expected] : defaults) EXPECT_TRUE(same_value(verl_at(config, key), expected)) << key;
  // Neither critic.model_args.model_name_or_path nor reward_pretrain: the critic starts from the actor's
  // model (verl's null), and without a device_mapping it takes actor_train's ranks (verl's null).
  EXPECT_FALSE(verl_at(config, "critic.model.path").IsDefined());
  EXPECT_FALSE(verl_at(config, "critic.device_mapping").IsDefined());
}

// ROLL builds its critic only for gae: otherwise the section (and value_clip, reward_pretrain) changes
// nothing, however wrong its values would be for a critic.
TEST(RollConfig, TheCriticSectionWithoutGaeHasNoEffect) {
  const RollConfig plain = translate("");
  const RollConfig config = translate(
      "{value_clip: 0.3, reward_pretrain: rm, critic: {model_args: {model_name_or_path: v, dtype: fp16}, "
      "training_args: {learning_rate: 1.0, per_device_train_batch_size: 3}, strategy_args: {strategy_name: "
      "fsdp2_train, strategy_config: {tensor_model_parallel_size: 4}}, device_mapping: [3]}}");
  EXPECT_EQ(leaves(config.verl_tree), leaves(plain.verl_tree));
  EXPECT_FALSE(config.device_mapping.ranks_by_role.contains("critic"));
}

// The critic's keys that have no verl key: accepted, and the tree is the one without them.
TEST(RollConfig, CriticKeysWithoutAVerlKeyWriteNothing) {
  const RollConfig plain = translate(with_critic("{}"));
  for (const char* model_type : {"trl", "auto_token_classification", "null"}) {
    const RollConfig config = translate(with_critic(fmt::format(
        "{{model_args: {{model_type: {}, disable_gradient_checkpointing: true, attn_implementation: fa2}}, "
        "training_args: {{num_train_epochs: 2, max_steps: 9, seed: 1}}, strategy_args: {{strategy_config: "
        "{{virtual_pipeline_model_parallel_size: null, expert_tensor_parallel_size: null}}}}, infer_batch_size: 4}}",
        model_type)));
    EXPECT_EQ(leaves(config.verl_tree), leaves(plain.verl_tree)) << model_type;
  }
}

TEST(RollDeviceMapping, TheCriticRunsOnItsOwnRanksOrActorTrains) {
  const std::vector<int64_t> both = {0, 1}, others = {2, 3};
  const std::string actor = "actor_train: {device_mapping: [0, 1]}";
  const RollConfig absent = translate(with_critic("{}", actor));
  EXPECT_EQ(absent.device_mapping.ranks_by_role.at("critic"), both);
  EXPECT_FALSE(verl_at(absent, "critic.device_mapping").IsDefined());  // null: the actor's ranks
  const RollConfig own = translate(with_critic("{device_mapping: 'list(range(2, 4))'}", actor));
  EXPECT_EQ(own.device_mapping.ranks_by_role.at("critic"), others);
  EXPECT_EQ(verl_at(own, "critic.device_mapping").as<std::vector<int64_t>>(), others);
  EXPECT_NE(error_of(with_critic("{device_mapping: 'list(range(a, 2))'}", actor))
                .find("critic.device_mapping: expected a list of ranks"),
            std::string::npos);
}

// Keys that are accepted but change nothing, the ones ROLL itself overwrites, and those accepted only
// at their default: none of them reaches verl's tree, and a wrong value of the last kind is an error.
TEST(RollConfig, KeysWithoutAVerlKeyWriteNothing) {
  const RollConfig plain = translate("");
  const RollConfig config = translate(
      "{logging_dir: logs, rpc_timeout: 100, reward_pretrain: m, value_clip: 0.5, logging_steps: 1, "
      "async_generation_ratio: 0, whiten_rewards: false, reward_clip: null, advantage_clip: ~, max_len_mask: false, "
      "difficulty_mask: false, importance_sampling: token, hydra: {run: {dir: .}, output_subdir: null}, "
      "actor_train: {model_args: {disable_gradient_checkpointing: true, attn_implementation: fa2}, "
      "training_args: {num_train_epochs: 3, max_steps: 9, seed: 1}, strategy_args: {strategy_config: "
      "{virtual_pipeline_model_parallel_size: null, expert_tensor_parallel_size: null}}}, "
      "actor_infer: {infer_batch_size: 4, model_args: {disable_gradient_checkpointing: true, attn_implementation: "
      "sdpa}, generating_args: {max_new_tokens: 8, num_return_sequences: 1, num_beams: 1, repetition_penalty: 1.0}}, "
      "reference: {model_args: {disable_gradient_checkpointing: true, attn_implementation: fa2}, strategy_args: "
      "{strategy_config: {virtual_pipeline_model_parallel_size: null, expert_tensor_parallel_size: null}}}, "
      "validation: {generating_args: {max_new_tokens: 8, num_beams: 1}}, "
      "rewards: {arith: {tag_included: [arith], world_size: 8, infer_batch_size: 2}}}");
  // Only the reference and validation sections' own defaults are new.
  YAML::Node expected = YAML::Clone(plain.verl_tree);
  merge_into(expected, translate("{reference: {}, validation: {}}").verl_tree);
  EXPECT_EQ(leaves(config.verl_tree), leaves(expected));
  for (const char* wrong :
       {"logging_steps: 2", "async_generation_ratio: 1", "whiten_rewards: true", "reward_clip: 10", "advantage_clip: 2",
        "max_len_mask: true", "difficulty_mask: true", "importance_sampling: seq", "hydra: {run: {dir: out}}",
        "hydra: {output_subdir: .hydra}", "actor_infer: {generating_args: {num_beams: 4}}",
        "actor_infer: {generating_args: {repetition_penalty: 1.1}}", "validation: {generating_args: {num_beams: 2}}"}) {
    const std::string error = error_of(wrong);
    EXPECT_NE(error.find("rlforge implements only ROLL's default"), std::string::npos) << wrong << ": " << error;
  }
}

TEST(RollConfig, UnknownKeysAreErrorsWithTheirPathTheFileAndADidYouMean) {
  const std::string lerning = error_of("actor_train: {training_args: {lerning_rate: 1.0e-6}}");
  EXPECT_NE(lerning.find("actor_train.training_args.lerning_rate: not a ROLL key rlforge reads"), std::string::npos)
      << lerning;
  EXPECT_NE(lerning.find("test.yaml"), std::string::npos) << lerning;
  EXPECT_NE(lerning.find("did you mean 'learning_rate'?"), std::string::npos) << lerning;
  EXPECT_NE(error_of("max_step: 3").find("max_step: not a ROLL key rlforge reads"), std::string::npos);
  EXPECT_NE(error_of("max_step: 3").find("did you mean 'max_steps'?"), std::string::npos);
  // Real ROLL keys outside the table are errors too.
  EXPECT_NE(error_of("rewards: {math: {tag_included: [arith], worker_cls: roll.x.MathRuleRewardWorker}}")
                .find("rewards.math.worker_cls: not a ROLL key rlforge reads"),
            std::string::npos);
  EXPECT_NE(error_of("actor_train: {data_args: {template: qwen2_5}}").find("actor_train.data_args: not a ROLL key"),
            std::string::npos);
  EXPECT_NE(error_of("reward_model: {}").find("reward_model: not a ROLL key"), std::string::npos);
  EXPECT_NE(error_of("actor_train: {training_args: 5}").find("actor_train.training_args: expected a map"),
            std::string::npos);
  // ROLL's optional sections may be null: none.
  EXPECT_NO_THROW(translate("{reference: {strategy_args: {strategy_config: null}}, validation: ~}"));
  EXPECT_TRUE(same_value(verl_at(translate("{eval_steps: 5, validation: ~}"), "trainer.test_freq"), "-1"));
}

TEST(RollConfig, OtherEnginesThanRlforgesAreErrors) {
  const std::string vllm = error_of("actor_infer: {strategy_args: {strategy_name: vllm}}");
  EXPECT_NE(vllm.find("actor_infer.strategy_args.strategy_name: 'vllm': rlforge runs its own engines"),
            std::string::npos)
      << vllm;
  EXPECT_NE(vllm.find("expected rlforge"), std::string::npos) << vllm;
  for (const char* name : {"sglang", "hf_infer", "megatron_infer"})
    EXPECT_NE(error_of(fmt::format("actor_infer: {{strategy_args: {{strategy_name: {}}}}}", name))
                  .find("rlforge runs its own engines"),
              std::string::npos)
        << name;
  for (const char* name : {"deepspeed_train", "fsdp2_train", "megatron_infer"})
    EXPECT_NE(error_of(fmt::format("actor_train: {{strategy_args: {{strategy_name: {}}}}}", name))
                  .find("expected megatron_train or rlforge"),
              std::string::npos)
        << name;
  EXPECT_NE(error_of("reference: {strategy_args: {strategy_name: deepspeed_infer}}")
                .find("expected megatron_infer or rlforge"),
            std::string::npos);
  EXPECT_NE(error_of("actor_train: {strategy_args: {strategy_name: megatron_trian}}")
                .find("unknown strategy; expected megatron_train or rlforge; did you mean 'megatron_train'?"),
            std::string::npos);
}

// ROLL settings whose numbers no verl key reproduces.
TEST(RollConfig, ValuesRlforgeCannotHonourAreErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"adv_estimator: gae", "adv_estimator: 'gae' needs ROLL's critic section"},
      {"{adv_estimator: gae, critic: {}}", "whiten_advantages: false with gae: verl's gae always whitens"},
      {with_critic("{}", "norm_mean_type: batch"), "norm_mean_type: batch: ROLL normalises the rewards before GAE"},
      {with_critic("{}", "norm_std_type: running"), "norm_std_type: running: ROLL normalises the rewards"},
      {"adv_estimator: gigpo", "adv_estimator: 'gigpo': expected gae, grpo or reinforce"},
      {"adv_estimator: reinforce", "adv_estimator: reinforce with norm_mean_type null, norm_std_type null"},
      {"{adv_estimator: reinforce, norm_mean_type: batch, norm_std_type: batch}", "has no verl estimator"},
      {"whiten_advantages: true", "whiten_advantages: true: verl's grpo does not whiten"},
      {"add_token_level_kl: true", "add_token_level_kl: true with a group baseline"},
      {"gamma: 0.9", "gamma: 0.9: verl's grpo has no discount"},
      {"entropy_loss_coef: -0.1", "entropy_loss_coef: -0.1: ROLL adds the entropy term only for a positive"},
      {"actor_train: {model_args: {dtype: fp16}}", "actor_train.model_args.dtype: 'fp16': expected fp32 or bf16"},
      {"actor_train: {router_replay: {mode: R4}}", "actor_train.router_replay.mode: 'R4': expected disable, R2 or R3"},
      {"actor_train: {training_args: {lr_scheduler_type: inverse_sqrt}}", "lr_scheduler_type: 'inverse_sqrt'"},
      {"track_with: wandb", "track_with: 'wandb': rlforge logs to the console and metrics.jsonl"},
      {"actor_infer: {generating_args: {max_new_tokens: 16}}",
       "actor_infer.generating_args.max_new_tokens: 16: ROLL replaces it with the response length (8)"},
      {"validation: {generating_args: {max_new_tokens: 16}}", "validation.generating_args.max_new_tokens: 16"},
      {"actor_infer: {generating_args: {num_return_sequences: 4}}",
       "num_return_sequences: 4: ROLL replaces it with num_return_sequences_in_group (1)"},
      {"actor_infer: {generating_args: {top_k: -2}}", "top_k: must be >= 1, or -1 / 0 for off"},
      {"{response_length: null}", "response_length: required (or sequence_length)"},
      {"{prompt_length: 16, sequence_length: 30}", "sequence_length: 30 is not prompt_length + response_length"},
      {"max_ckpt_to_keep: -1", "max_ckpt_to_keep: must be >= 0"},
      {"rollout_batch_size: 0", "rollout_batch_size: must be positive"},
      {with_critic("{model_args: {model_type: auto_sequence_classification}}"),
       "critic.model_args.model_type: 'auto_sequence_classification': expected trl or auto_token_classification"},
      {with_critic("{model_args: {dtype: fp16}}"), "critic.model_args.dtype: 'fp16': expected fp32 or bf16"},
      {with_critic("{strategy_args: {strategy_name: fsdp2_train}}"),
       "critic.strategy_args.strategy_name: 'fsdp2_train': rlforge runs its own engines"},
      {with_critic("{}", "value_clip: -1"), "value_clip: must be >= 0"},
      {"critic_warmup: -1", "critic_warmup: must be >= 0"},
      {with_critic("{strategy_args: {strategy_config: {tensor_model_parallel_size: 2}}}"),
       "critic.strategy_args.strategy_config.tensor_model_parallel_size: TP x PP x CP = 2 does not divide the 1 ranks"},
      {with_critic("{strategy_args: {strategy_config: {expert_tensor_parallel_size: 2}}}"),
       "critic.strategy_args.strategy_config.expert_tensor_parallel_size: 2: rlforge's engine has no such "
       "parallelism"},
      {with_critic("{training_args: {per_device_train_batch_size: 3}}", "num_return_sequences_in_group: 2"),
       "critic.training_args.gradient_accumulation_steps: an optimizer step's 3 responses"},
      // 3 responses per optimizer step are not whole groups of 2; 8 do not divide a step's 2 x 2.
      {"{num_return_sequences_in_group: 2, actor_train: {training_args: {per_device_train_batch_size: 3}}}",
       "actor_train.training_args.gradient_accumulation_steps: an optimizer step's 3 responses"},
      {"{rollout_batch_size: 2, num_return_sequences_in_group: 2}", "do not divide a step's 4"},
      {"actor_train: {strategy_args: {strategy_config: {tensor_model_parallel_size: 2}}}",
       "tensor_model_parallel_size: TP x PP x CP = 2 does not divide the 1 ranks"},
      {"{pretrain: a, actor_infer: {model_args: {model_name_or_path: b}}}",
       "actor_infer.model_args.model_name_or_path: 'b': ROLL replaces it with pretrain (a) because actor_train "
       "names no model"},
      {"{actor_train: {model_args: {model_name_or_path: a}}, actor_infer: {model_args: {model_name_or_path: b}}, "
       "reference: {model_args: {model_name_or_path: a}}}",
       "actor_infer.model_args.model_name_or_path: 'b' differs from actor_train.model_args.model_name_or_path's 'a'"},
  };
  for (const auto& [roll, message] : cases) {
    const std::string error = error_of(roll);
    EXPECT_NE(error.find(message), std::string::npos) << roll << "\n  got: " << error;
    EXPECT_NE(error.find("test.yaml"), std::string::npos) << error;
  }
}

TEST(RollConfig, RewardDomainsNeedRuleScorersAndCoverTheTask) {
  EXPECT_NO_THROW(translate("rewards: {arith: {tag_included: [arith]}, gsm: {tag_included: [openai/gsm8k]}}"));
  const std::string unknown = error_of("rewards: {math: {tag_included: [arith, deepmath_103k]}}");
  EXPECT_NE(unknown.find("rewards.math.tag_included[1]:"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("deepmath_103k"), std::string::npos) << unknown;
  const std::string uncovered = error_of("rewards: {gsm: {tag_included: [openai/gsm8k]}}");
  EXPECT_NE(uncovered.find("rewards: no domain's tag_included names 'arith'"), std::string::npos) << uncovered;
  // Rows from files carry their own data_source: then the task is not the source.
  EXPECT_NO_THROW(
      translate("{rewards: {gsm: {tag_included: [openai/gsm8k]}}, rlforge: {data: {train_files: [a.jsonl]}}}"));
}

TEST(RollConfig, RlforgeBlockTakesOnlyVerlKeysNoRollKeySets) {
  const RollConfig config = translate(
      "rlforge: {data: {task: arith, val_size: 10}, actor_rollout_ref: {model: {tokenizer_path: builtin:arith}}, "
      "resources: {device_memory_gb: 2}}");
  EXPECT_TRUE(same_value(verl_at(config, "data.val_size"), "10"));
  EXPECT_TRUE(same_value(verl_at(config, "actor_rollout_ref.model.tokenizer_path"), "builtin:arith"));
  EXPECT_TRUE(same_value(verl_at(config, "resources.device_memory_gb"), "2"));
  const std::string typo = error_of("rlforge: {data: {tsk: arith}}");
  EXPECT_NE(typo.find("rlforge.data.tsk: 'data.tsk' is not a key of `rlforge train`'s config"), std::string::npos)
      << typo;
  EXPECT_NE(typo.find("did you mean 'task'?"), std::string::npos) << typo;
  const std::string spelled_in_roll = error_of("rlforge: {trainer: {total_training_steps: 3}}");
  EXPECT_NE(spelled_in_roll.find("rlforge.trainer.total_training_steps: trainer.total_training_steps has a ROLL key, "
                                 "max_steps: set it there"),
            std::string::npos)
      << spelled_in_roll;
  EXPECT_NE(error_of("rlforge: {actor_rollout_ref: {actor: {optim: {lr: 0.1}}}}")
                .find("has a ROLL key, actor_train.training_args.learning_rate"),
            std::string::npos);
  EXPECT_NE(error_of("rlforge: {trainer: 3}").find("rlforge.trainer: expected a map"), std::string::npos);
  EXPECT_NE(error_of("rlforge: [1]").find("rlforge: expected a map of verl keys"), std::string::npos);
}

TEST(RollConfig, ReferencesToOtherKeysResolveAndKeepTheirType) {
  const RollConfig config = translate(
      "{exp_name: arith, output_dir: 'runs/${exp_name}/x', response_length: 6, actor_infer: {generating_args: "
      "{max_new_tokens: '${response_length}'}}, prompt_length: '${response_length}'}");
  EXPECT_TRUE(same_value(verl_at(config, "trainer.default_local_dir"), "runs/arith/x"));
  EXPECT_TRUE(same_value(verl_at(config, "data.max_prompt_length"), "6"));
  EXPECT_NE(error_of("output_dir: '${nope}'").find("output_dir: ${nope}: no such key in this file"), std::string::npos);
  EXPECT_NE(error_of("output_dir: '${oc.env:HOME}'").find("not OmegaConf's resolvers"), std::string::npos);
  EXPECT_NE(error_of("{exp_name: '${output_dir}', output_dir: '${exp_name}'}").find("a cycle of references"),
            std::string::npos);
  EXPECT_NE(error_of("output_dir: 'a/${actor_train}'").find("must name a scalar"), std::string::npos);
}

TEST(RollDeviceMapping, ReadsListsAndPythonRangesOnly) {
  const auto parse = [](const std::string& yaml) { return rl::parse_device_mapping(YAML::Load(yaml), "m"); };
  EXPECT_EQ(parse("[2, 0, 1]"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(parse("list(range(0,4))"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(parse("'list(range(2, 5))'"), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(parse("list(range(0, 8, 3))"), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(parse("'[1, 0]'"), (std::vector<int64_t>{0, 1}));
  const auto error = [&](const std::string& yaml) {
    try {
      parse(yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted " << yaml;
    return std::string();
  };
  for (const char* python : {"__import__('os').getcwd()", "list(range(4))", "range(0,4)", "list(range(0,4,0))",
                             "list(range(a,4))", "'[0, 1'"})
    EXPECT_NE(error(python).find("expected a list of ranks"), std::string::npos) << python;
  EXPECT_NE(error("null").find("CPU-only worker"), std::string::npos);
  EXPECT_NE(error("list(range(-1,2))").find("rank -1 is negative"), std::string::npos);
  EXPECT_NE(error("[0, 1, 1]").find("rank 1 is listed twice"), std::string::npos);
  EXPECT_NE(error("list(range(3,3))").find("names no rank"), std::string::npos);
  EXPECT_NE(error("[0, a]").find("m[1]"), std::string::npos);
}

TEST(RollDeviceMapping, RanksBecomeThePlacementKeys) {
  const RollConfig config =
      translate("{actor_train: {device_mapping: 'list(range(0,2))'}, actor_infer: {device_mapping: [1, 0]}}");
  const std::vector<int64_t> both = {0, 1};
  EXPECT_EQ(config.device_mapping.ranks_by_role.at("actor_train"), both);
  EXPECT_EQ(config.device_mapping.ranks_by_role.at("actor_infer"), both);
  EXPECT_EQ(config.device_mapping.ranks_by_role.at("reference"), both);  // none given: actor_train's
  // rlforge's placement keys (rl/trainer/role_placement.h, which checks them against the world) get the ranks; the
  // reference without a section stays null, which is the actor's ranks there.
  EXPECT_TRUE(same_value(verl_at(config, "actor_rollout_ref.actor.device_mapping"), "[0, 1]"));
  EXPECT_TRUE(same_value(verl_at(config, "actor_rollout_ref.rollout.device_mapping"), "[0, 1]"));
  EXPECT_FALSE(verl_at(config, "actor_rollout_ref.ref.device_mapping").IsDefined());
  EXPECT_TRUE(same_value(verl_at(translate("{actor_train: {device_mapping: [0, 1]}, reference: {device_mapping: "
                                           "'list(range(0, 2))'}}"),
                                 "actor_rollout_ref.ref.device_mapping"),
                         "[0, 1]"));
  // Roles on subsets of the ranks pass through to the placement keys (rl/trainer/role_placement.h checks the world).
  const RollConfig subset = translate("{actor_train: {device_mapping: [0, 1]}, actor_infer: {device_mapping: "
                                      "'list(range(2,4))'}}");
  EXPECT_TRUE(same_value(verl_at(subset, "actor_rollout_ref.actor.device_mapping"), "[0, 1]"));
  EXPECT_TRUE(same_value(verl_at(subset, "actor_rollout_ref.rollout.device_mapping"), "[2, 3]"));
  EXPECT_NE(error_of("actor_train: {device_mapping: null}").find("CPU-only worker"), std::string::npos);
  try {
    translate_roll_config(YAML::Load("{response_length: 8, adv_estimator: grpo, actor_train: {}}"), "test.yaml");
    ADD_FAILURE() << "accepted without actor_train.device_mapping";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("actor_train.device_mapping: required"), std::string::npos) << e.what();
  }
}

TEST(RollConfig, DetectsRollFilesAndDocumentsEveryRow) {
  EXPECT_TRUE(is_roll_config(YAML::Load("actor_train: {}")));
  EXPECT_TRUE(is_roll_config(YAML::Load("actor_infer: {}")));
  EXPECT_FALSE(is_roll_config(YAML::Load("actor_rollout_ref: {actor: {}}")));
  const std::string docs = document_roll_config();
  for (const RollKey& row : roll_keys())
    EXPECT_NE(docs.find(fmt::format("| `{}` |", row.key)), std::string::npos) << row.key;
}

// Every row of the table is exercised by a test above: by the row cases, or by name here.
TEST(RollConfig, EveryRowIsCovered) {
  std::set<std::string> covered;
  for (const RowCase& c : row_cases()) covered.insert(c.row);
  for (const char* row : {"logging_dir",
                          "logging_steps",
                          "rpc_timeout",
                          "async_generation_ratio",
                          "hydra.run.dir",
                          "hydra.output_subdir",
                          "reward_pretrain",
                          "whiten_rewards",
                          "reward_clip",
                          "advantage_clip",
                          "value_clip",
                          "max_len_mask",
                          "difficulty_mask",
                          "importance_sampling",
                          "actor_train.model_args.disable_gradient_checkpointing",
                          "actor_train.model_args.attn_implementation",
                          "actor_train.training_args.num_train_epochs",
                          "actor_train.training_args.max_steps",
                          "actor_train.training_args.seed",
                          "actor_train.strategy_args.strategy_config.expert_tensor_parallel_size",
                          "actor_train.device_mapping",
                          "actor_infer.model_args.disable_gradient_checkpointing",
                          "actor_infer.model_args.attn_implementation",
                          "actor_infer.generating_args.max_new_tokens",
                          "actor_infer.generating_args.num_return_sequences",
                          "actor_infer.generating_args.num_beams",
                          "actor_infer.generating_args.repetition_penalty",
                          "actor_infer.device_mapping",
                          "actor_infer.infer_batch_size",
                          "reference.model_args.disable_gradient_checkpointing",
                          "reference.model_args.attn_implementation",
                          "reference.strategy_args.strategy_config.expert_tensor_parallel_size",
                          "reference.device_mapping",
                          "validation.generating_args.max_new_tokens",
                          "validation.generating_args.num_beams",
                          "rewards.*.tag_included",
                          "rewards.*.world_size",
                          "rewards.*.infer_batch_size",
                          "critic.model_args.model_type",
                          "critic.model_args.disable_gradient_checkpointing",
                          "critic.model_args.attn_implementation",
                          "critic.training_args.num_train_epochs",
                          "critic.training_args.max_steps",
                          "critic.training_args.seed",
                          "critic.strategy_args.strategy_config.expert_tensor_parallel_size",
                          "critic.device_mapping",
                          "critic.infer_batch_size"})
    covered.insert(row);
  for (const RollKey& row : roll_keys()) EXPECT_TRUE(covered.contains(std::string(row.key))) << row.key;
}

}  // namespace
}  // namespace rf::apps
