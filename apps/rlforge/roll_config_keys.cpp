// The ROLL key table (roll_config_keys.h) and its converters. ROLL's meanings and defaults are read
// from its code at the snapshot spec roll.md follows: roll/configs/*.py (BaseConfig, PPOConfig,
// WorkerConfig, GeneratingArguments, TrainingArguments), roll/pipeline/rlvr/rlvr_config.py,
// roll/utils/functionals.py (reward_norm, compute_advantage, agg_loss), roll/pipeline/rlvr/actor_worker.py
// (the loss), roll/pipeline/base_worker.py (CriticWorker: the value loss, its one pass per step),
// roll/pipeline/rlvr/rlvr_pipeline.py (the step, critic_warmup) and mcore_adapter's Megatron LR
// scheduler. Where a ROLL setting has no verl key with the same numbers, its row accepts only the values
// that have one and says why for the others.
#include "apps/rlforge/roll_config_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "apps/rlforge/roll_extension.h"
#include "apps/rlforge/roll_translator.h"
#include "config/suggest.h"
#include "config/yaml_util.h"
#include "core/error.h"
#include "core/log.h"
#include "rl/advantage_estimator.h"
#include "rl/rewards/reward_scorer.h"

namespace rf::apps {
namespace {

using Translator = RollTranslator;

std::string role_of(const std::string& key) { return key.substr(0, key.find('.')); }

// The one verl key of a single-key row.
std::string row_key(const Translator& t) { return std::string(t.row().verl_keys); }

// value() as V; a ConfigError when the file gives null and ROLL has no default.
template <class V>
V need(const Translator& t, const std::string& key) {
  const auto value = t.get<V>(key);
  if (!value) t.fail(key, "expected a value, got null");
  return *value;
}

// value() as a positive integer; `fallback` when neither the file nor ROLL's defaults give one.
int64_t positive(const Translator& t, const std::string& key, int64_t fallback) {
  const int64_t value = t.value(key).IsDefined() ? need<int64_t>(t, key) : fallback;
  if (value <= 0) t.fail(key, fmt::format("must be positive, got {}", value));
  return value;
}

// --- generic converters

template <class V>
void copy(Translator& t, const std::string& key) {
  if (const auto value = t.get<V>(key)) t.set_value(row_key(t), *value);
}

void copy_positive(Translator& t, const std::string& key) {
  if (t.value(key).IsDefined()) t.set_value(row_key(t), positive(t, key, 0));
}

// A size ROLL leaves null when off (virtual_pipeline_model_parallel_size, the first and last stages' layers):
// copied when set.
void copy_positive_unless_null(Translator& t, const std::string& key) {
  if (!t.value(key).IsNull()) copy_positive(t, key);
}

// A key rlforge implements only at ROLL's default (the row's roll_default).
void only_default(Translator& t, const std::string& key) {
  const YAML::Node expected = YAML::Load(std::string(t.row().roll_default));
  if (t.in_file(key) && !config::same_yaml_value(t.value(key), expected))
    t.fail(key, fmt::format("{}: rlforge implements only ROLL's default {} here (docs/config.md says why)",
                            config::flow_yaml(t.value(key)), config::flow_yaml(expected)));
}

// Megatron sizes rlforge has no key for, which are "off" at null or 1.
void only_one(Translator& t, const std::string& key) {
  const YAML::Node value = t.value(key);
  if (value.IsDefined() && !value.IsNull() && !config::same_yaml_value(value, YAML::Node(1)))
    t.fail(key,
           fmt::format("{}: rlforge's engine has no such parallelism; expected 1 or null", config::flow_yaml(value)));
}

// Memory and speed knobs of ROLL's backends, and keys ROLL itself overrides: accepted, warned about.
void no_effect(Translator& t, const std::string& key) {
  if (t.in_file(key)) t.note_no_effect(key);
}

// Read by another row (named in the meaning).
void read_elsewhere(Translator&, const std::string&) {}

// ROLL builds its critic only for gae (rlvr_pipeline.py); otherwise nothing reads the critic section.
bool critic_runs(const Translator& t) {
  return t.has_section("critic") && t.get<std::string>("adv_estimator") == "gae";
}

// A row of the critic section: converted when the critic runs, else a key with no effect.
template <void (*Convert)(Translator&, const std::string&)>
void critic_key(Translator& t, const std::string& key) {
  if (critic_runs(t))
    Convert(t, key);
  else
    no_effect(t, key);
}

// --- sizes and lengths

int64_t group_size(const Translator& t) { return positive(t, "num_return_sequences_in_group", 1); }

int64_t response_length(const Translator& t) {
  const auto response = t.get<int64_t>("response_length");
  const auto sequence = t.get<int64_t>("sequence_length");
  const int64_t prompt = positive(t, "prompt_length", 0);
  if (!response && !sequence) t.fail("response_length", "required (or sequence_length): the longest response");
  if (!sequence) return *response;
  // ROLL keeps sequence_length and recomputes the response length from it.
  if (response && *response + prompt != *sequence)
    t.fail("sequence_length", fmt::format("{} is not prompt_length + response_length = {} + {}; give one of the two",
                                          *sequence, prompt, *response));
  return *sequence - prompt;
}

void lengths(Translator& t, const std::string&) {
  const int64_t response = response_length(t);
  if (response <= 0) t.fail("response_length", fmt::format("must be positive, got {}", response));
  t.set_value("data.max_response_length", response);
}

// ROLL overwrites these with values it derives; a different value would silently lose.
void equals_response_length(Translator& t, const std::string& key) {
  const auto value = t.get<int64_t>(key);
  if (value && *value != response_length(t))
    t.fail(key, fmt::format("{}: ROLL replaces it with the response length ({}); expected that or "
                            "${{response_length}}",
                            *value, response_length(t)));
}

void equals_group_size(Translator& t, const std::string& key) {
  const auto value = t.get<int64_t>(key);
  if (value && *value != group_size(t))
    t.fail(key, fmt::format("{}: ROLL replaces it with num_return_sequences_in_group ({}); expected that or "
                            "${{num_return_sequences_in_group}}",
                            *value, group_size(t)));
}

// --- run

void track_with(Translator& t, const std::string& key) {
  const auto tracker = t.get<std::string>(key);
  if (!tracker) return;
  if (*tracker != "stdout")
    t.fail(key, fmt::format("'{}': rlforge logs to the console and metrics.jsonl, which is ROLL's stdout; "
                            "expected stdout (tensorboard, wandb, swanlab are not available)",
                            *tracker));
  t.set_value("trainer.logger", std::vector<std::string>{"console", "jsonl"});
}

void max_ckpt_to_keep(Translator& t, const std::string& key) {
  const int64_t keep = t.get<int64_t>(key).value_or(0);
  if (keep < 0) t.fail(key, fmt::format("must be >= 0 (0: keep all), got {}", keep));
  t.set("trainer.max_actor_ckpt_to_keep", keep == 0 ? YAML::Node(YAML::NodeType::Null) : config::to_yaml(keep));
}

void resume_from_checkpoint(Translator& t, const std::string& key) {
  const YAML::Node value = t.value(key);
  if (value.IsNull() || config::same_yaml_value(value, YAML::Node(false))) {
    t.set_value("trainer.resume_mode", std::string("disable"));
  } else if (config::same_yaml_value(value, YAML::Node(true))) {
    t.set_value("trainer.resume_mode", std::string("auto"));
  } else if (value.IsScalar()) {
    t.set_value("trainer.resume_mode", std::string("resume_path"));
    t.set_value("trainer.resume_from_path", value.Scalar());
  } else {
    t.fail(key, fmt::format("expected false, true or a checkpoint path, got {}", config::describe_node(value)));
  }
}

// ROLL validates at step 0 and every eval_steps steps, and only when a validation role exists.
void eval_steps(Translator& t, const std::string& key) {
  const bool validates = t.has_section("validation");
  if (!validates) no_effect(t, key);
  t.set_value("trainer.test_freq", validates ? positive(t, key, 0) : int64_t{-1});
  t.set_value("trainer.val_before_train", validates);
}

void seed(Translator& t, const std::string& key) {
  const uint64_t value = need<uint64_t>(t, key);
  t.set_value("actor_rollout_ref.actor.megatron.seed", value);
  t.set_value("actor_rollout_ref.actor.data_loader_seed", value);
}

void offload_states(Translator& t, const std::string& key) {
  const auto offload = t.get<bool>(key);
  if (!offload) return;
  for (const char* verl_key :
       {"actor_rollout_ref.actor.megatron.param_offload", "actor_rollout_ref.actor.megatron.grad_offload",
        "actor_rollout_ref.actor.megatron.optimizer_offload", "actor_rollout_ref.ref.megatron.param_offload"})
    t.set_value(verl_key, *offload);
}

// ROLL: when any of the three roles names no model, all three start from `pretrain`.
void model_path(Translator& t, const std::string& key) {
  const auto pretrain = t.get<std::string>(key);
  std::vector<std::pair<std::string, std::string>> named;
  std::string unnamed;
  for (const char* role : {"actor_train", "actor_infer", "reference"}) {
    const std::string role_key = std::string(role) + ".model_args.model_name_or_path";
    if (const auto path = t.get<std::string>(role_key))
      named.emplace_back(role_key, *path);
    else if (unnamed.empty())
      unnamed = role;
  }
  const std::optional<std::string> path = unnamed.empty() ? std::optional(named.front().second) : pretrain;
  for (const auto& [role_key, role_path] : named) {
    if (!unnamed.empty() && role_path != path)
      t.fail(role_key, fmt::format("'{}': ROLL replaces it with pretrain ({}) because {} names no model; set the "
                                   "model once, in pretrain",
                                   role_path, path.value_or("null"), unnamed));
    if (role_path != path)
      t.fail(role_key, fmt::format("'{}' differs from {}'s '{}': rlforge's actor, rollout and reference start from "
                                   "one model",
                                   role_path, named.front().first, *path));
  }
  if (path) t.set_value("actor_rollout_ref.model.path", *path);
}

// --- algorithm

// ROLL's advantage is a reward normalisation (norm_mean_type / norm_std_type, forced to group/group by
// grpo) followed by the discounted return (or GAE over the critic's values) and an optional whitening; the
// combinations below are verl estimators with the same numbers. ROLL subtracts the token-level KL after
// normalising and verl's grpo before, so grpo takes no KL in the reward; gae normalises nothing, so its KL
// in the reward is verl's.
void adv_estimator(Translator& t, const std::string& key) {
  const std::string estimator = need<std::string>(t, key);
  const auto mean = t.get<std::string>("norm_mean_type"), deviation = t.get<std::string>("norm_std_type");
  const bool whiten = t.get<bool>("whiten_advantages").value_or(false);
  const bool group_mean = mean == "group" && (!deviation || deviation == "group") && !whiten;
  std::string verl;
  bool norm_by_std = true;
  if (estimator == "grpo" || (estimator == "reinforce" && group_mean)) {
    if (estimator == "grpo") {
      no_effect(t, "norm_mean_type");  // ROLL's grpo sets both to group
      no_effect(t, "norm_std_type");
      if (whiten) t.fail("whiten_advantages", "true: verl's grpo does not whiten the group-normalised advantages");
    }
    if (t.get<bool>("add_token_level_kl").value_or(false))
      t.fail("add_token_level_kl",
             "true with a group baseline: ROLL subtracts the KL after the group normalisation, "
             "verl's grpo before it; use use_kl_loss");
    if (const double gamma = t.get<double>("gamma").value_or(1.0); gamma != 1.0)
      t.fail("gamma", fmt::format("{}: verl's grpo has no discount; expected 1", gamma));
    verl = "grpo";
    norm_by_std = estimator == "grpo" || deviation == "group";
  } else if (estimator == "reinforce" && !mean && !deviation && whiten) {
    verl = "reinforce_plus_plus";
  } else if (estimator == "reinforce") {
    t.fail(key, fmt::format("reinforce with norm_mean_type {}, norm_std_type {}, whiten_advantages {} has no verl "
                            "estimator with the same numbers; rlforge reads group/group (verl's grpo), group/null "
                            "(grpo, norm_adv_by_std_in_grpo false) and null/null with whiten_advantages true "
                            "(reinforce_plus_plus)",
                            mean.value_or("null"), deviation.value_or("null"), whiten));
  } else if (estimator == "gae") {
    if (!t.has_section("critic"))
      t.fail(key, "'gae' needs ROLL's critic section: the value model (model_args, training_args, strategy_args)");
    if (mean || deviation)
      t.fail(mean ? "norm_mean_type" : "norm_std_type",
             fmt::format("{}: ROLL normalises the rewards before GAE, verl's gae does not; expected null with gae",
                         mean.value_or(deviation.value_or(""))));
    if (!whiten)
      t.fail("whiten_advantages",
             "false with gae: verl's gae always whitens the advantages; expected true (as ROLL's PPO example sets)");
    verl = "gae";
  } else {
    t.fail(key, fmt::format("'{}': expected gae, grpo or reinforce (gigpo, step_reinforce and agentic_reinforce are "
                            "ROLL's agentic estimators)",
                            estimator));
  }
  t.rekeyed(key, [&] { rl::find_advantage_estimator(verl); });
  t.set_value("algorithm.adv_estimator", verl);
  t.set_value("algorithm.norm_adv_by_std_in_grpo", norm_by_std);
}

void target_kl(Translator& t, const std::string& key) {
  const auto target = t.get<double>(key);
  t.set_value("algorithm.kl_ctrl.type", std::string(target ? "adaptive" : "fixed"));
  if (target) t.set_value("algorithm.kl_ctrl.target_kl", *target);
}

// ROLL clips at pg_clip, or at pg_clip_low / pg_clip_high when use_pg_clip_range is true.
void pg_clip(Translator& t, const std::string& key) {
  const double clip = need<double>(t, key);
  const bool range = t.get<bool>("use_pg_clip_range").value_or(false);
  t.set_value("actor_rollout_ref.actor.clip_ratio", clip);
  t.set_value("actor_rollout_ref.actor.clip_ratio_low", range ? need<double>(t, "pg_clip_low") : clip);
  t.set_value("actor_rollout_ref.actor.clip_ratio_high", range ? need<double>(t, "pg_clip_high") : clip);
}

void pg_clip_bound(Translator& t, const std::string& key) {
  if (!t.get<bool>("use_pg_clip_range").value_or(false)) no_effect(t, key);
}

// ROLL's dual clip bounds a negative-advantage token's loss at (1 + 2 pg_clip)|A|: verl's clip_ratio_c.
// verl always applies one (default 3); without ROLL's, the bound is the largest double, which never binds
// on a finite ratio (config values are finite: config/bind.h).
void dual_clip_loss(Translator& t, const std::string& key) {
  const double clip = t.get<double>("pg_clip").value_or(0.2);
  t.set_value("actor_rollout_ref.actor.clip_ratio_c",
              t.get<bool>(key).value_or(false) ? 1.0 + 2.0 * clip : std::numeric_limits<double>::max());
}

// ROLL's KL loss is always k3, verl's low_var_kl.
void use_kl_loss(Translator& t, const std::string& key) {
  t.set_value("actor_rollout_ref.actor.use_kl_loss", t.get<bool>(key).value_or(false));
  t.set_value("actor_rollout_ref.actor.kl_loss_type", std::string("low_var_kl"));
}

void entropy_loss_coef(Translator& t, const std::string& key) {
  const double coef = need<double>(t, key);
  if (coef < 0)
    t.fail(key, fmt::format("{}: ROLL adds the entropy term only for a positive coefficient; expected >= 0", coef));
  t.set_value(row_key(t), coef);
}

// ROLL's router_replay.mode: disable / R2 / R3, verl's disabled / R2 / R3.
void router_replay_mode(Translator& t, const std::string& key) {
  const auto mode = t.get<std::string>(key);
  if (!mode) return;
  if (*mode != "disable" && *mode != "R2" && *mode != "R3")
    t.fail(key, fmt::format("'{}': expected disable, R2 or R3", *mode));
  t.set_value(row_key(t), *mode == "disable" ? std::string("disabled") : *mode);
}

// --- roles

void dtype(Translator& t, const std::string& key) {
  const auto name = t.get<std::string>(key);
  if (!name) return;
  if (*name != "fp32" && *name != "bf16")
    t.fail(key, fmt::format("'{}': expected fp32 or bf16 (rlforge computes in float32 or bfloat16)", *name));
  t.set_value(row_key(t), std::string(*name == "fp32" ? "float32" : "bfloat16"));
}

// ROLL's strategy names (roll/distributed/strategy/factory.py, and deepspeed's of the first releases).
constexpr std::array<std::string_view, 11> kRollStrategies = {
    "megatron_train", "megatron_infer", "fsdp2_train", "fsdp2_infer", "deepspeed_train", "deepspeed_infer", "vllm",
    "sglang", "hf_infer", "mock_infer", "diffusion_deepspeed_train"};

// `allowed` names the strategies that become `verl_value` for this role.
void strategy(Translator& t, const std::string& key, const std::vector<std::string>& allowed,
              const std::string& verl_value) {
  const auto name = t.get<std::string>(key);
  if (!name) return;
  if (std::ranges::find(allowed, *name) != allowed.end()) {
    t.set_value(row_key(t), verl_value);
    return;
  }
  const std::string expected = fmt::format("expected {}", fmt::join(allowed, " or "));
  if (std::ranges::find(kRollStrategies, *name) != kRollStrategies.end())
    t.fail(key, fmt::format("'{}': rlforge runs its own engines (a Megatron-style trainer and its own rollout), not "
                            "ROLL's backends; {}",
                            *name, expected));
  std::vector<std::string> known(allowed);
  known.insert(known.end(), kRollStrategies.begin(), kRollStrategies.end());
  const auto suggestion = config::suggest_nearest(*name, known);
  t.fail(key, fmt::format("'{}': unknown strategy; {}{}", *name, expected,
                          suggestion ? fmt::format("; did you mean '{}'?", *suggestion) : ""));
}

void train_strategy(Translator& t, const std::string& key) {
  strategy(t, key, {"megatron_train", "rlforge"}, "megatron");
}
void reference_strategy(Translator& t, const std::string& key) {
  strategy(t, key, {"megatron_infer", "rlforge"}, "megatron");
}
void rollout_strategy(Translator& t, const std::string& key) { strategy(t, key, {"rlforge"}, "rlforge"); }

// vLLM's top_k: -1 (and HF's 0) is off.
void top_k(Translator& t, const std::string& key) {
  const auto k = t.get<int64_t>(key);
  if (!k) return;
  if (*k < -1) t.fail(key, fmt::format("must be >= 1, or -1 / 0 for off, got {}", *k));
  t.set_value(row_key(t), *k == 0 ? int64_t{-1} : *k);
}

std::vector<int64_t> actor_train_ranks(const Translator& t) {
  const std::string key = "actor_train.device_mapping";
  const YAML::Node value = t.value(key);
  if (!value.IsDefined())
    t.fail(key,
           "required: the ranks of the trained actor (their number sets the data-parallel size of ROLL's batch "
           "arithmetic), e.g. list(range(0,1)) for one process");
  std::vector<int64_t> ranks;
  t.rekeyed(key, [&] { ranks = rl::parse_device_mapping(value, key); });
  return ranks;
}

// Each role's ranks go to rlforge's placement key (rl/trainer/role_placement.h). A role without a device_mapping
// runs where actor_train does (rlforge colocates its roles); the reference then stays null, which is
// already "the actor's ranks" there.
void device_mapping(Translator& t, const std::string& key) {
  const std::string role = role_of(key);
  const YAML::Node value = t.value(key);
  std::vector<int64_t> ranks;
  if (role == "actor_train")
    ranks = actor_train_ranks(t);
  else if (!value.IsDefined())
    ranks = t.device_mapping().ranks_by_role.at("actor_train");
  else
    t.rekeyed(key, [&] { ranks = rl::parse_device_mapping(value, key); });
  t.device_mapping().ranks_by_role[role] = ranks;
  if (value.IsDefined() || role != "reference") t.set_value(row_key(t), ranks);
}

// The critic's ranks: its own device_mapping, else actor_train's (where rlforge's critic runs when
// critic.device_mapping is null).
std::vector<int64_t> critic_ranks(const Translator& t) {
  const std::string key = "critic.device_mapping";
  if (!t.in_file(key)) return actor_train_ranks(t);
  std::vector<int64_t> ranks;
  t.rekeyed(key, [&] { ranks = rl::parse_device_mapping(t.value(key), key); });
  return ranks;
}

void critic_device_mapping(Translator& t, const std::string& key) {
  const std::vector<int64_t> ranks = critic_ranks(t);
  t.device_mapping().ranks_by_role["critic"] = ranks;
  if (t.in_file(key)) t.set_value(row_key(t), ranks);
}

// verl's section of a trained ROLL role: actor_train is verl's actor, critic its critic.
std::string verl_train_section(const std::string& role) {
  return role == "critic" ? "critic." : "actor_rollout_ref.actor.";
}

// One optimizer step of a ROLL Megatron training role (actor_train, or the critic on its ranks in its own
// TP x PP x CP) takes per_device_train_batch_size x gradient_accumulation_steps responses on each of its
// dp ranks.
struct TrainBatch {
  int64_t per_device = 0;
  int64_t responses_per_update = 0;  // R
  int64_t updates_per_step = 0;      // K: optimizer steps per RL step
};

// ROLL's actor passes over a step's batch ppo_epochs times, its critic once (CriticWorker.train_step's
// iterator takes epochs=1).
int64_t epochs_of(const Translator& t, const std::string& role) {
  return role == "critic" ? 1 : positive(t, "ppo_epochs", 1);
}

TrainBatch train_batch(const Translator& t, const std::string& role) {
  const std::string args = role + ".training_args.", config = role + ".strategy_args.strategy_config.";
  const int64_t per_device = positive(t, args + "per_device_train_batch_size", 0);
  const int64_t accumulation = positive(t, args + "gradient_accumulation_steps", 0);
  const int64_t model_parallel = positive(t, config + "tensor_model_parallel_size", 1) *
                                 positive(t, config + "pipeline_model_parallel_size", 1) *
                                 positive(t, config + "context_parallel_size", 1);
  const int64_t num_ranks = int64_t((role == "critic" ? critic_ranks(t) : actor_train_ranks(t)).size());
  if (num_ranks % model_parallel != 0)
    t.fail(config + "tensor_model_parallel_size",
           fmt::format("TP x PP x CP = {} does not divide the {} ranks of {}.device_mapping", model_parallel, num_ranks,
                       role == "critic" && t.in_file("critic.device_mapping") ? "critic" : "actor_train"));
  const int64_t responses = per_device * accumulation * (num_ranks / model_parallel);
  const int64_t group = group_size(t);
  const int64_t step_responses = positive(t, "rollout_batch_size", 0) * group;
  if (responses % group != 0)
    t.fail(args + "gradient_accumulation_steps",
           fmt::format("an optimizer step's {} responses (per_device_train_batch_size {} x gradient_accumulation_steps "
                       "{} x {} data-parallel ranks) are not whole groups of num_return_sequences_in_group {}: verl "
                       "counts a mini-batch in prompts",
                       responses, per_device, accumulation, num_ranks / model_parallel, group));
  if (step_responses % responses != 0)
    t.fail(args + "gradient_accumulation_steps",
           fmt::format("an optimizer step's {} responses do not divide a step's {} (rollout_batch_size x "
                       "num_return_sequences_in_group)",
                       responses, step_responses));
  return {per_device, responses, step_responses / responses * epochs_of(t, role)};
}

void batch_sizes(Translator& t, const std::string& key) {
  const std::string role = role_of(key), section = verl_train_section(role);
  const TrainBatch batch = train_batch(t, role);
  t.set_value(section + "ppo_micro_batch_size_per_gpu", batch.per_device);
  t.set_value(section + "ppo_mini_batch_size", batch.responses_per_update / group_size(t));
}

// ROLL steps its scheduler per optimizer step, rlforge (verl) per RL step.
void warmup_steps(Translator& t, const std::string& key) {
  const int64_t warmup = t.get<int64_t>(key).value_or(0);
  if (warmup <= 0) {
    t.set_value(row_key(t), int64_t{0});  // verl: <= 0 leaves it to lr_warmup_steps_ratio, as ROLL does
    return;
  }
  const int64_t per_step = train_batch(t, role_of(key)).updates_per_step;
  const int64_t steps = (warmup + per_step - 1) / per_step;
  if (warmup % per_step != 0)
    core::log_warning(
        "{}: {} optimizer steps is not a whole number of RL steps ({} optimizer steps each); "
        "rlforge warms up over {} RL steps",
        key, warmup, per_step, steps);
  t.set_value(row_key(t), steps);
}

// HF scheduler names as mcore_adapter maps them onto Megatron's decay styles.
void lr_scheduler_type(Translator& t, const std::string& key) {
  const std::string name = need<std::string>(t, key);
  const std::vector<std::pair<std::string, std::string>> styles = {{"linear", "linear"},
                                                                   {"cosine", "cosine"},
                                                                   {"constant", "constant"},
                                                                   {"constant_with_warmup", "constant"},
                                                                   {"cosine_with_min_lr", "cosine"},
                                                                   {"cosine_warmup_with_min_lr", "cosine"}};
  for (const auto& [roll_name, style] : styles) {
    if (name != roll_name) continue;
    t.set_value(row_key(t), style);
    return;
  }
  t.fail(key, fmt::format("'{}': expected linear, cosine, constant, constant_with_warmup, cosine_with_min_lr or "
                          "cosine_warmup_with_min_lr",
                          name));
}

void adam_betas(Translator& t, const std::string& key) {
  const std::string args = role_of(key) + ".training_args.";
  t.set_value(row_key(t),
              std::vector<double>{need<double>(t, args + "adam_beta1"), need<double>(t, args + "adam_beta2")});
}

// --- the critic

// ROLL's critic starts from critic.model_args.model_name_or_path, else from reward_pretrain. ROLL has no
// critic without either; rlforge's (verl's) null starts it from the actor's model.
void critic_model_path(Translator& t, const std::string& key) {
  const auto path = t.get<std::string>(key);
  const auto reward_pretrain = t.get<std::string>("reward_pretrain");
  if (path || reward_pretrain) t.set_value(row_key(t), path ? *path : *reward_pretrain);
}

// Read by critic_model_path when the critic runs and names no model of its own.
void reward_pretrain(Translator& t, const std::string& key) {
  if (!critic_runs(t) || t.get<std::string>("critic.model_args.model_name_or_path")) no_effect(t, key);
}

// ROLL's value model is a causal LM under trl's value head or an AutoModelForTokenClassification; rlforge
// tells them apart by the folder (an LM's backbone gets a new value head, a *ForTokenClassification folder
// loads whole), so both names (and null) mean what rlforge does.
void critic_model_type(Translator& t, const std::string& key) {
  const auto type = t.get<std::string>(key);
  if (type && *type != "trl" && *type != "auto_token_classification")
    t.fail(key, fmt::format("'{}': expected trl or auto_token_classification (the critic is a value model)", *type));
}

// ROLL's value loss is ½ (v̂ - G)² averaged over each response's tokens, then over the responses
// (seq-mean-token-mean, whatever loss_agg_mode says), with the clipped term when value_clip is set.
// Without a clip it is verl's loss at the largest clip range, which never binds on finite values.
void value_clip(Translator& t, const std::string& key) {
  if (!critic_runs(t)) {
    no_effect(t, key);
    return;
  }
  const auto clip = t.get<double>(key);
  if (clip && *clip < 0) t.fail(key, fmt::format("must be >= 0 (null: no clip), got {}", *clip));
  t.set_value("critic.cliprange_value", clip.value_or(std::numeric_limits<double>::max()));
  t.set_value("critic.loss_agg_mode", std::string("seq-mean-token-mean"));
}

// ROLL's actor makes ppo_epochs passes over a step's batch, its critic one (see epochs_of).
void ppo_epochs(Translator& t, const std::string& key) {
  if (t.value(key).IsDefined()) t.set_value("actor_rollout_ref.actor.ppo_epochs", positive(t, key, 0));
  if (critic_runs(t)) t.set_value("critic.ppo_epochs", int64_t{1});
}

// ROLL counts steps from 0 and verl from 1, and both train the actor once critic_warmup <= step: ROLL's
// k critic-only steps are verl's critic_warmup k + 1 (0 and 1 both mean none there).
void critic_warmup(Translator& t, const std::string& key) {
  const int64_t warmup = t.get<int64_t>(key).value_or(0);
  if (warmup < 0) t.fail(key, fmt::format("must be >= 0 (the steps that train only the critic), got {}", warmup));
  t.set_value(row_key(t), warmup == 0 ? int64_t{0} : warmup + 1);
}

// --- rewards

// Each tag is a data_source rlforge scores with its rule scorer (verl's default_compute_score dispatch).
void tag_included(Translator& t, const std::string& key) {
  const YAML::Node tags = t.value(key);
  if (!tags.IsSequence() || tags.size() == 0)
    t.fail(key, fmt::format("expected a list of tags (data_source values), got {}", config::describe_node(tags)));
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string tag_key = fmt::format("{}[{}]", key, i);
    t.rekeyed(tag_key, [&] { rl::make_rule_scorer(config::bind<std::string>(tags[i], tag_key)); });
  }
}

constexpr char kBatchArithmetic[] =
    "responses per micro-batch on each rank (`ppo_micro_batch_size_per_gpu`). An optimizer step takes R = "
    "per_device_train_batch_size x gradient_accumulation_steps x dp responses, dp = len(actor_train.device_mapping) "
    "/ (TP x PP x CP), so `ppo_mini_batch_size` = R / num_return_sequences_in_group prompts; R must be whole groups "
    "and divide rollout_batch_size x num_return_sequences_in_group";

constexpr RollKey kRollKeys[] = {
    // --- the run
    {"exp_name", "trainer.experiment_name", "", copy<std::string>, "names the run"},
    {"seed", "actor_rollout_ref.actor.megatron.seed actor_rollout_ref.actor.data_loader_seed", "42", seed,
     "every worker's seed: a new model's initialisation, the sampling streams, the mini-batch shuffle (the data "
     "order is rlforge's `data.seed`)"},
    {"output_dir", "trainer.default_local_dir", "./output", copy<std::string>,
     "run folder: checkpoints, metrics.jsonl, plot"},
    {"logging_dir", "", "", no_effect, "no effect: rlforge logs into the run folder (output_dir)"},
    {"track_with", "trainer.logger", "", track_with, "`stdout` only: the console and metrics.jsonl"},
    {"max_steps", "trainer.total_training_steps", "500", copy_positive, "RL steps of the run"},
    {"save_steps", "trainer.save_freq", "50", copy<int64_t>, "checkpoint every k steps and at the end"},
    {"eval_steps", "trainer.test_freq trainer.val_before_train", "10", eval_steps,
     "with a `validation` section: validate at step 0 and every k steps; without one, never"},
    {"logging_steps", "", "1", only_default, "1 only: rlforge logs every step"},
    {"max_ckpt_to_keep", "trainer.max_actor_ckpt_to_keep", "0", max_ckpt_to_keep,
     "keep the newest k checkpoints (0: all)"},
    {"resume_from_checkpoint", "trainer.resume_mode trainer.resume_from_path", "false", resume_from_checkpoint,
     "false: start afresh (`disable`); true: the newest checkpoint in output_dir (`auto`); a path: that checkpoint "
     "(`resume_path`)"},
    {"rpc_timeout", "", "", no_effect, "no effect: Ray's; rlforge has no RPC"},
    {"num_nodes", "trainer.nnodes", "", copy_positive, "nodes"},
    {"num_gpus_per_node", "trainer.n_gpus_per_node", "", copy_positive, "ranks per node"},
    {"is_offload_states",
     "actor_rollout_ref.actor.megatron.param_offload actor_rollout_ref.actor.megatron.grad_offload "
     "actor_rollout_ref.actor.megatron.optimizer_offload actor_rollout_ref.ref.megatron.param_offload",
     "", offload_states, "offload each role's state while it is idle"},
    {"async_generation_ratio", "", "0", only_default, "0 only: rlforge's step is synchronous"},
    {"hydra.run.dir", "", ".", only_default, "`.` only: rlforge runs in the current folder"},
    {"hydra.output_subdir", "", "null", only_default, "null only: rlforge writes no Hydra folder"},
    // --- sizes
    {"rollout_batch_size", "data.train_batch_size", "128", copy_positive, "prompts per step"},
    {"num_return_sequences_in_group", "actor_rollout_ref.rollout.n", "1", copy_positive,
     "responses per prompt (the group)"},
    {"prompt_length", "data.max_prompt_length", "1024", copy_positive, "max prompt tokens"},
    {"response_length", "data.max_response_length", "", lengths, "max response tokens (required, or sequence_length)"},
    {"sequence_length", "", "", read_elsewhere, "prompt_length + response_length, when response_length is not given"},
    // --- models
    {"pretrain", "actor_rollout_ref.model.path", "", model_path,
     "the HF folder the actor, rollout and reference start from"},
    {"reward_pretrain", "", "", reward_pretrain,
     "the critic's start when critic.model_args.model_name_or_path is null (see there); rlforge's rewards are rule "
     "scorers, so it has no other effect"},
    // --- algorithm (ROLL's PPOConfig)
    {"adv_estimator", "algorithm.adv_estimator algorithm.norm_adv_by_std_in_grpo", "gae", adv_estimator,
     "gae -> gae (needs the critic section, whiten_advantages true and no norm_mean_type / norm_std_type: verl's "
     "gae always whitens and never normalises the rewards); grpo -> grpo; reinforce with norm_mean_type/norm_std_type "
     "group/group -> grpo, group/null -> grpo with norm_adv_by_std_in_grpo false, null/null with whiten_advantages "
     "-> reinforce_plus_plus; other combinations have no verl estimator with the same numbers"},
    {"norm_mean_type", "", "", read_elsewhere, "see adv_estimator (ROLL's grpo ignores it)"},
    {"norm_std_type", "", "", read_elsewhere, "see adv_estimator (ROLL's grpo ignores it)"},
    {"whiten_advantages", "", "false", read_elsewhere, "see adv_estimator"},
    {"gamma", "algorithm.gamma", "", copy<double>, "discount (1 with a group baseline)"},
    {"lambd", "algorithm.lam", "0.95", copy<double>, "GAE lambda"},
    {"critic_warmup", "trainer.critic_warmup", "0", critic_warmup,
     "steps that train only the critic before the actor starts; ROLL counts steps from 0, verl from 1, so k -> "
     "critic_warmup k + 1 (0 -> 0)"},
    {"add_token_level_kl", "algorithm.use_kl_in_reward", "false", copy<bool>,
     "KL penalty in the token rewards (not with a group baseline: ROLL subtracts it after normalising)"},
    {"kl_penalty", "algorithm.kl_penalty", "", copy<std::string>, "KL estimator in the reward: kl, abs, mse, full"},
    {"init_kl_coef", "algorithm.kl_ctrl.kl_coef", "0.2", copy<double>,
     "KL-in-reward coefficient (the start, when adaptive)"},
    {"target_kl", "algorithm.kl_ctrl.type algorithm.kl_ctrl.target_kl", "", target_kl,
     "null: a fixed KL coefficient; a number: the adaptive controller's target"},
    {"kl_horizon", "algorithm.kl_ctrl.horizon", "", copy<double>, "adaptive KL controller's horizon"},
    {"whiten_rewards", "", "false", only_default, "false only: verl has no reward whitening"},
    {"reward_clip", "", "null", only_default, "null only: verl does not clip rewards"},
    {"advantage_clip", "", "null", only_default, "null only: verl does not clip advantages"},
    {"value_clip", "critic.cliprange_value critic.loss_agg_mode", "", value_clip,
     "the critic's value clip (null: none, cliprange_value 1.7976931348623157e+308, the largest double); ROLL's value loss always averages per response "
     "(critic.loss_agg_mode seq-mean-token-mean, whatever loss_agg_mode says)"},
    {"max_len_mask", "", "false", only_default, "false only: verl keeps truncated responses in the loss"},
    {"difficulty_mask", "", "false", only_default, "false only: verl does not mask groups by difficulty"},
    {"importance_sampling", "", "token", only_default,
     "token only (ROLL's seq ratio has no verl loss with its gradient)"},
    {"ppo_epochs", "actor_rollout_ref.actor.ppo_epochs critic.ppo_epochs", "", ppo_epochs,
     "the actor's passes over each step's batch; ROLL's critic always makes one (critic.ppo_epochs 1)"},
    {"pg_clip",
     "actor_rollout_ref.actor.clip_ratio actor_rollout_ref.actor.clip_ratio_low "
     "actor_rollout_ref.actor.clip_ratio_high",
     "0.2", pg_clip, "PPO clip range (both sides unless use_pg_clip_range)"},
    {"use_pg_clip_range", "", "false", read_elsewhere, "clip at pg_clip_low / pg_clip_high instead (see pg_clip)"},
    {"pg_clip_low", "", "0.2", pg_clip_bound, "lower clip range with use_pg_clip_range"},
    {"pg_clip_high", "", "0.2", pg_clip_bound, "upper clip range with use_pg_clip_range"},
    {"dual_clip_loss", "actor_rollout_ref.actor.clip_ratio_c", "false", dual_clip_loss,
     "true: dual clip at 1 + 2 pg_clip; false: none (clip_ratio_c 1.7976931348623157e+308, the largest double; verl's default is 3)"},
    {"loss_agg_mode", "actor_rollout_ref.actor.loss_agg_mode", "seq-mean-token-mean", copy<std::string>,
     "token-mean, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm"},
    {"use_kl_loss", "actor_rollout_ref.actor.use_kl_loss actor_rollout_ref.actor.kl_loss_type", "false", use_kl_loss,
     "KL to the reference as a loss term (ROLL's k3 is verl's low_var_kl)"},
    {"kl_loss_coef", "actor_rollout_ref.actor.kl_loss_coef", "0", copy<double>, "coefficient of the KL loss"},
    {"entropy_loss_coef", "actor_rollout_ref.actor.entropy_coeff", "0", entropy_loss_coef,
     "entropy bonus coefficient (>= 0)"},
    // --- actor_train: the trained policy (verl's actor)
    {"actor_train.model_args.model_name_or_path", "actor_rollout_ref.model.path", "", read_elsewhere,
     "see pretrain (all three roles start from one model)"},
    {"actor_train.model_args.dtype", "actor_rollout_ref.actor.megatron.dtype", "bf16", dtype, "fp32 or bf16"},
    {"actor_train.router_replay.mode", "actor_rollout_ref.actor.router_replay.mode", "disable", router_replay_mode,
     "MoE router replay: disable, R2 (the old-log-prob pass's routing replayed in the update) or R3 (the rollout's "
     "routing replayed in the old-log-prob pass and the update)"},
    {"actor_train.model_args.disable_gradient_checkpointing", "", "", no_effect,
     "no effect: memory knob; rlforge keeps activations"},
    {"actor_train.model_args.attn_implementation", "", "", no_effect, "no effect: rlforge has its own attention"},
    {"actor_train.training_args.learning_rate", "actor_rollout_ref.actor.optim.lr", "5.0e-5", copy<double>,
     "peak learning rate"},
    {"actor_train.training_args.weight_decay", "actor_rollout_ref.actor.optim.weight_decay", "0.0", copy<double>,
     "decoupled weight decay"},
    {"actor_train.training_args.adam_beta1", "actor_rollout_ref.actor.optim.betas", "0.9", adam_betas,
     "Adam beta1 (with adam_beta2)"},
    {"actor_train.training_args.adam_beta2", "", "0.999", read_elsewhere, "Adam beta2 (see adam_beta1)"},
    {"actor_train.training_args.lr_scheduler_type", "actor_rollout_ref.actor.optim.lr_decay_style", "linear",
     lr_scheduler_type,
     "linear, cosine, constant; constant_with_warmup -> constant, cosine_with_min_lr / cosine_warmup_with_min_lr -> "
     "cosine (Megatron's styles, as mcore_adapter maps them)"},
    {"actor_train.training_args.warmup_steps", "actor_rollout_ref.actor.optim.lr_warmup_steps", "0", warmup_steps,
     "ROLL counts optimizer steps, verl RL steps: ceil(warmup_steps / K), K = optimizer steps per RL step (see "
     "per_device_train_batch_size) x ppo_epochs; a warning when K does not divide it"},
    {"actor_train.training_args.warmup_ratio", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "", copy<double>,
     "warmup as a fraction of the run (when warmup_steps is 0)"},
    {"actor_train.training_args.per_device_train_batch_size",
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu actor_rollout_ref.actor.ppo_mini_batch_size", "8",
     batch_sizes, kBatchArithmetic},
    {"actor_train.training_args.gradient_accumulation_steps", "", "1", read_elsewhere,
     "micro-batches per optimizer step on each rank (see per_device_train_batch_size)"},
    {"actor_train.training_args.num_train_epochs", "", "", no_effect, "no effect: ROLL's RL pipeline does not read it"},
    {"actor_train.training_args.max_steps", "", "", no_effect, "no effect: ROLL derives it from max_steps"},
    {"actor_train.training_args.seed", "", "", no_effect, "no effect: ROLL replaces it with seed"},
    {"actor_train.strategy_args.strategy_name", "actor_rollout_ref.actor.strategy", "", train_strategy,
     "megatron_train or rlforge: rlforge's Megatron-style TrainEngine"},
    {"actor_train.strategy_args.strategy_config.tensor_model_parallel_size",
     "actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "", copy_positive, "TP size"},
    {"actor_train.strategy_args.strategy_config.pipeline_model_parallel_size",
     "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", "", copy_positive, "PP size"},
    {"actor_train.strategy_args.strategy_config.context_parallel_size",
     "actor_rollout_ref.actor.megatron.context_parallel_size", "", copy_positive, "CP size"},
    {"actor_train.strategy_args.strategy_config.expert_model_parallel_size",
     "actor_rollout_ref.actor.megatron.expert_model_parallel_size", "", copy_positive, "EP size"},
    {"actor_train.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
     "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size", "", copy_positive_unless_null,
     "model chunks per pipeline rank, run interleaved (null: none)"},
    // Megatron's layer-split keys (mcore_adapter passes any Megatron argument through strategy_config).
    {"actor_train.strategy_args.strategy_config.num_layers_in_first_pipeline_stage",
     "actor_rollout_ref.actor.megatron.num_layers_in_first_pipeline_stage", "", copy_positive_unless_null,
     "decoder layers on pipeline rank 0 (null: even split)"},
    {"actor_train.strategy_args.strategy_config.num_layers_in_last_pipeline_stage",
     "actor_rollout_ref.actor.megatron.num_layers_in_last_pipeline_stage", "", copy_positive_unless_null,
     "decoder layers on the last pipeline rank (null: even split)"},
    {"actor_train.strategy_args.strategy_config.account_for_embedding_in_pipeline_split",
     "actor_rollout_ref.actor.megatron.account_for_embedding_in_pipeline_split", "", copy<bool>,
     "count the embedding as a layer of the split"},
    {"actor_train.strategy_args.strategy_config.account_for_loss_in_pipeline_split",
     "actor_rollout_ref.actor.megatron.account_for_loss_in_pipeline_split", "", copy<bool>,
     "count the output layer and loss as a layer of the split"},
    {"actor_train.strategy_args.strategy_config.pipeline_model_parallel_layout",
     "actor_rollout_ref.actor.megatron.pipeline_model_parallel_layout", "", copy<std::string>,
     "every virtual stage's layers, e.g. \"Et|(tt|)*3,L\""},
    {"actor_train.strategy_args.strategy_config.microbatch_group_size_per_vp_stage",
     "actor_rollout_ref.actor.megatron.microbatch_group_size_per_vp_stage", "", copy_positive_unless_null,
     "interleaved 1F1B: micro-batches per virtual stage in a row (null: the PP size)"},
    {"actor_train.strategy_args.strategy_config.expert_tensor_parallel_size",
     "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size", "", copy_positive_unless_null,
     "ETP size: null (the TP size), the TP size or 1"},
    {"actor_train.strategy_args.strategy_config.sequence_parallel",
     "actor_rollout_ref.actor.megatron.sequence_parallel", "", copy<bool>, "sequence parallelism (with TP > 1)"},
    {"actor_train.strategy_args.strategy_config.use_distributed_optimizer",
     "actor_rollout_ref.actor.megatron.use_distributed_optimizer", "", copy<bool>, "ZeRO-1 over DP"},
    {"actor_train.strategy_args.strategy_config.overlap_grad_reduce",
     "actor_rollout_ref.actor.megatron.overlap_grad_reduce", "", copy<bool>, "overlap DP reductions with the backward"},
    {"actor_train.strategy_args.strategy_config.overlap_param_gather",
     "actor_rollout_ref.actor.megatron.overlap_param_gather", "", copy<bool>,
     "overlap the distributed optimizer's gathers with the forward"},
    {"actor_train.strategy_args.strategy_config.recompute_granularity",
     "actor_rollout_ref.actor.megatron.recompute_granularity", "", copy<std::string>,
     "activation recompute: full or selective"},
    {"actor_train.strategy_args.strategy_config.recompute_method", "actor_rollout_ref.actor.megatron.recompute_method",
     "", copy<std::string>, "with full: uniform or block"},
    {"actor_train.strategy_args.strategy_config.recompute_num_layers",
     "actor_rollout_ref.actor.megatron.recompute_num_layers", "", copy_positive_unless_null,
     "with full: the group size (uniform) or layers per chunk (block)"},
    {"actor_train.strategy_args.strategy_config.recompute_modules", "actor_rollout_ref.actor.megatron.recompute_modules",
     "", copy<std::vector<std::string>>, "with selective: core_attn, layernorm, mlp"},
    {"actor_train.strategy_args.strategy_config.distribute_saved_activations",
     "actor_rollout_ref.actor.megatron.distribute_saved_activations", "false", copy<bool>,
     "with full at TP > 1: each TP rank keeps 1/TP of a recomputed group's input"},
    // Megatron's MoE arguments (mcore_adapter passes them through strategy_config).
    {"actor_train.strategy_args.strategy_config.moe_token_dispatcher_type",
     "actor_rollout_ref.actor.megatron.moe_token_dispatcher_type", "", copy<std::string>,
     "alltoall or allgather"},
    {"actor_train.strategy_args.strategy_config.moe_grouped_gemm",
     "actor_rollout_ref.actor.megatron.moe_grouped_gemm", "", copy<bool>,
     "the local experts as one grouped GEMM (false: a GEMM per expert)"},
    {"actor_train.strategy_args.strategy_config.moe_layer_recompute",
     "actor_rollout_ref.actor.megatron.moe_layer_recompute", "", copy<bool>,
     "recompute the MoE layers' forward in backward"},
    {"actor_train.strategy_args.strategy_config.moe_shared_expert_overlap",
     "actor_rollout_ref.actor.megatron.moe_shared_expert_overlap", "", copy<bool>, "not built (false only)"},
    {"actor_train.strategy_args.strategy_config.moe_router_load_balancing_type",
     "actor_rollout_ref.actor.megatron.moe_router_load_balancing_type", "", copy<std::string>,
     "aux_loss, seq_aux_loss or none"},
    {"actor_train.strategy_args.strategy_config.moe_aux_loss_coeff",
     "actor_rollout_ref.actor.megatron.moe_aux_loss_coeff", "", copy<double>, "weight of the load-balancing loss"},
    {"actor_train.strategy_args.strategy_config.moe_z_loss_coeff",
     "actor_rollout_ref.actor.megatron.moe_z_loss_coeff", "", copy<double>, "weight of the router z-loss"},
    {"actor_train.strategy_args.strategy_config.moe_expert_capacity_factor",
     "actor_rollout_ref.actor.megatron.moe_expert_capacity_factor", "", copy<double>,
     "expert capacity factor (absent: dropless)"},
    {"actor_train.strategy_args.strategy_config.moe_token_drop_policy",
     "actor_rollout_ref.actor.megatron.moe_token_drop_policy", "", copy<std::string>, "probs or position"},
    {"actor_train.strategy_args.strategy_config.moe_pad_expert_input_to_capacity",
     "actor_rollout_ref.actor.megatron.moe_pad_expert_input_to_capacity", "", copy<bool>,
     "pad every expert to its capacity"},
    {"actor_train.model_args.moe_aux_loss_coef", "actor_rollout_ref.actor.megatron.moe_aux_loss_coeff", "",
     copy<double>, "weight of the MoE load-balancing loss"},
    {"actor_train.strategy_args.strategy_config.max_grad_norm", "actor_rollout_ref.actor.optim.clip_grad", "",
     copy<double>, "global gradient-norm clip"},
    {"actor_train.strategy_args.strategy_config.adam_epsilon", "actor_rollout_ref.actor.optim.eps", "", copy<double>,
     "Adam epsilon"},
    {"actor_train.strategy_args.strategy_config.lr_scheduler_kwargs.min_lr", "actor_rollout_ref.actor.optim.min_lr", "",
     copy<double>, "learning rate at the end of the decay"},
    {"actor_train.device_mapping", "actor_rollout_ref.actor.device_mapping", "", device_mapping,
     "required: the ranks, a list or `list(range(a,b))` (the critic's too)"},
    {"actor_train.infer_batch_size", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "16", copy_positive,
     "responses per forward of the old-log-prob pass"},
    // --- actor_infer: generation (verl's rollout)
    {"actor_infer.model_args.model_name_or_path", "actor_rollout_ref.model.path", "", read_elsewhere, "see pretrain"},
    {"actor_infer.model_args.dtype", "actor_rollout_ref.rollout.dtype", "bf16", dtype, "fp32 or bf16"},
    {"actor_infer.model_args.disable_gradient_checkpointing", "", "", no_effect,
     "no effect: generation keeps no activations"},
    {"actor_infer.model_args.attn_implementation", "", "", no_effect, "no effect: rlforge has its own attention"},
    {"actor_infer.generating_args.max_new_tokens", "", "", equals_response_length,
     "the response length (ROLL replaces it with that)"},
    {"actor_infer.generating_args.temperature", "actor_rollout_ref.rollout.temperature", "0.95", copy<double>,
     "sampling temperature"},
    {"actor_infer.generating_args.top_p", "actor_rollout_ref.rollout.top_p", "0.7", copy<double>, "top-p"},
    {"actor_infer.generating_args.top_k", "actor_rollout_ref.rollout.top_k", "50", top_k, "top-k (-1 or 0: off)"},
    {"actor_infer.generating_args.do_sample", "actor_rollout_ref.rollout.do_sample", "true", copy<bool>,
     "sample (false: greedy)"},
    {"actor_infer.generating_args.num_return_sequences", "", "", equals_group_size,
     "num_return_sequences_in_group (ROLL replaces it with that)"},
    {"actor_infer.generating_args.num_beams", "", "1", only_default, "1 only: no beam search"},
    {"actor_infer.generating_args.repetition_penalty", "", "1.0", only_default, "1.0 only"},
    {"actor_infer.strategy_args.strategy_name", "actor_rollout_ref.rollout.name", "", rollout_strategy,
     "rlforge: rlforge's paged, continuously batching RolloutEngine (vllm and sglang do not run here)"},
    {"actor_infer.strategy_args.strategy_config.tensor_parallel_size",
     "actor_rollout_ref.rollout.tensor_model_parallel_size", "", copy_positive, "the rollout's TP size"},
    {"actor_infer.strategy_args.strategy_config.gpu_memory_utilization",
     "actor_rollout_ref.rollout.gpu_memory_utilization", "", copy<double>,
     "fraction of the device budget for the KV cache"},
    {"actor_infer.strategy_args.strategy_config.kv_cache_bytes", "actor_rollout_ref.rollout.kv_cache_bytes", "",
     copy_positive, "rlforge: KV cache bytes (wins over gpu_memory_utilization)"},
    {"actor_infer.strategy_args.strategy_config.block_size", "actor_rollout_ref.rollout.block_size", "", copy_positive,
     "tokens per KV cache block"},
    {"actor_infer.strategy_args.strategy_config.max_num_seqs", "actor_rollout_ref.rollout.max_num_seqs", "",
     copy_positive, "sequences running at once"},
    {"actor_infer.strategy_args.strategy_config.max_num_batched_tokens",
     "actor_rollout_ref.rollout.max_num_batched_tokens", "", copy_positive, "tokens per engine step"},
    {"actor_infer.strategy_args.strategy_config.enable_prefix_caching",
     "actor_rollout_ref.rollout.enable_prefix_caching", "", copy<bool>, "share identical prompt prefixes"},
    {"actor_infer.strategy_args.strategy_config.enable_chunked_prefill",
     "actor_rollout_ref.rollout.enable_chunked_prefill", "", copy<bool>, "split long prompts over steps"},
    {"actor_infer.device_mapping", "actor_rollout_ref.rollout.device_mapping", "", device_mapping,
     "the ranks (absent: actor_train's)"},
    {"actor_infer.infer_batch_size", "", "", no_effect, "no effect: generation batches continuously"},
    // --- reference: the frozen policy (verl's ref)
    {"reference.model_args.model_name_or_path", "actor_rollout_ref.model.path", "", read_elsewhere, "see pretrain"},
    {"reference.model_args.dtype", "actor_rollout_ref.ref.megatron.dtype", "bf16", dtype, "fp32 or bf16"},
    {"reference.model_args.disable_gradient_checkpointing", "", "", no_effect,
     "no effect: a forward keeps no activations"},
    {"reference.model_args.attn_implementation", "", "", no_effect, "no effect: rlforge has its own attention"},
    {"reference.strategy_args.strategy_name", "actor_rollout_ref.ref.strategy", "", reference_strategy,
     "megatron_infer or rlforge: rlforge's InferEngine"},
    {"reference.strategy_args.strategy_config.tensor_model_parallel_size",
     "actor_rollout_ref.ref.megatron.tensor_model_parallel_size", "", copy_positive, "TP size"},
    {"reference.strategy_args.strategy_config.pipeline_model_parallel_size",
     "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size", "", copy_positive, "PP size"},
    {"reference.strategy_args.strategy_config.context_parallel_size",
     "actor_rollout_ref.ref.megatron.context_parallel_size", "", copy_positive, "CP size"},
    {"reference.strategy_args.strategy_config.expert_model_parallel_size",
     "actor_rollout_ref.ref.megatron.expert_model_parallel_size", "", copy_positive, "EP size"},
    // Megatron's MoE arguments (mcore_adapter passes them through strategy_config).
    {"reference.strategy_args.strategy_config.moe_token_dispatcher_type",
     "actor_rollout_ref.ref.megatron.moe_token_dispatcher_type", "", copy<std::string>,
     "alltoall or allgather"},
    {"reference.strategy_args.strategy_config.moe_grouped_gemm",
     "actor_rollout_ref.ref.megatron.moe_grouped_gemm", "", copy<bool>,
     "the local experts as one grouped GEMM (false: a GEMM per expert)"},
    {"reference.strategy_args.strategy_config.moe_layer_recompute",
     "actor_rollout_ref.ref.megatron.moe_layer_recompute", "", copy<bool>,
     "recompute the MoE layers' forward in backward"},
    {"reference.strategy_args.strategy_config.moe_shared_expert_overlap",
     "actor_rollout_ref.ref.megatron.moe_shared_expert_overlap", "", copy<bool>, "not built (false only)"},
    {"reference.strategy_args.strategy_config.moe_router_load_balancing_type",
     "actor_rollout_ref.ref.megatron.moe_router_load_balancing_type", "", copy<std::string>,
     "aux_loss, seq_aux_loss or none"},
    {"reference.strategy_args.strategy_config.moe_aux_loss_coeff",
     "actor_rollout_ref.ref.megatron.moe_aux_loss_coeff", "", copy<double>, "weight of the load-balancing loss"},
    {"reference.strategy_args.strategy_config.moe_z_loss_coeff",
     "actor_rollout_ref.ref.megatron.moe_z_loss_coeff", "", copy<double>, "weight of the router z-loss"},
    {"reference.strategy_args.strategy_config.moe_expert_capacity_factor",
     "actor_rollout_ref.ref.megatron.moe_expert_capacity_factor", "", copy<double>,
     "expert capacity factor (absent: dropless)"},
    {"reference.strategy_args.strategy_config.moe_token_drop_policy",
     "actor_rollout_ref.ref.megatron.moe_token_drop_policy", "", copy<std::string>, "probs or position"},
    {"reference.strategy_args.strategy_config.moe_pad_expert_input_to_capacity",
     "actor_rollout_ref.ref.megatron.moe_pad_expert_input_to_capacity", "", copy<bool>,
     "pad every expert to its capacity"},
    {"reference.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
     "actor_rollout_ref.ref.megatron.virtual_pipeline_model_parallel_size", "", copy_positive_unless_null,
     "model chunks per pipeline rank, run interleaved (null: none)"},
    {"reference.strategy_args.strategy_config.num_layers_in_first_pipeline_stage",
     "actor_rollout_ref.ref.megatron.num_layers_in_first_pipeline_stage", "", copy_positive_unless_null,
     "decoder layers on pipeline rank 0 (null: even split)"},
    {"reference.strategy_args.strategy_config.num_layers_in_last_pipeline_stage",
     "actor_rollout_ref.ref.megatron.num_layers_in_last_pipeline_stage", "", copy_positive_unless_null,
     "decoder layers on the last pipeline rank (null: even split)"},
    {"reference.strategy_args.strategy_config.account_for_embedding_in_pipeline_split",
     "actor_rollout_ref.ref.megatron.account_for_embedding_in_pipeline_split", "", copy<bool>,
     "count the embedding as a layer of the split"},
    {"reference.strategy_args.strategy_config.account_for_loss_in_pipeline_split",
     "actor_rollout_ref.ref.megatron.account_for_loss_in_pipeline_split", "", copy<bool>,
     "count the output layer and loss as a layer of the split"},
    {"reference.strategy_args.strategy_config.pipeline_model_parallel_layout",
     "actor_rollout_ref.ref.megatron.pipeline_model_parallel_layout", "", copy<std::string>,
     "every virtual stage's layers, e.g. \"Et|(tt|)*3,L\""},
    {"reference.strategy_args.strategy_config.microbatch_group_size_per_vp_stage",
     "actor_rollout_ref.ref.megatron.microbatch_group_size_per_vp_stage", "", copy_positive_unless_null,
     "interleaved 1F1B: micro-batches per virtual stage in a row (null: the PP size)"},
    {"reference.strategy_args.strategy_config.expert_tensor_parallel_size",
     "actor_rollout_ref.ref.megatron.expert_tensor_parallel_size", "", copy_positive_unless_null,
     "ETP size: null (the TP size), the TP size or 1"},
    {"reference.strategy_args.strategy_config.sequence_parallel", "actor_rollout_ref.ref.megatron.sequence_parallel",
     "", copy<bool>, "sequence parallelism (with TP > 1)"},
    {"reference.device_mapping", "actor_rollout_ref.ref.device_mapping", "", device_mapping,
     "the ranks (absent: actor_train's)"},
    {"reference.infer_batch_size", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "16", copy_positive,
     "responses per forward of the reference pass"},
    // --- critic: the value model of gae (verl's critic), on actor_train's ranks; without gae no effect
    {"critic.model_args.model_name_or_path", "critic.model.path", "", critic_key<critic_model_path>,
     "the HF folder the critic starts from (null: reward_pretrain; neither: the actor's model): an LM's backbone "
     "under a new value head, or a *ForTokenClassification folder"},
    {"critic.model_args.dtype", "critic.megatron.dtype", "bf16", critic_key<dtype>, "fp32 or bf16"},
    {"critic.model_args.model_type", "", "", critic_key<critic_model_type>,
     "null, trl or auto_token_classification: rlforge reads which value model it is from the folder"},
    {"critic.model_args.disable_gradient_checkpointing", "", "", no_effect,
     "no effect: memory knob; rlforge keeps activations"},
    {"critic.model_args.attn_implementation", "", "", no_effect, "no effect: rlforge has its own attention"},
    {"critic.training_args.learning_rate", "critic.optim.lr", "5.0e-5", critic_key<copy<double>>, "peak learning rate"},
    {"critic.training_args.weight_decay", "critic.optim.weight_decay", "0.0", critic_key<copy<double>>,
     "decoupled weight decay"},
    {"critic.training_args.adam_beta1", "critic.optim.betas", "0.9", critic_key<adam_betas>,
     "Adam beta1 (with adam_beta2)"},
    {"critic.training_args.adam_beta2", "", "0.999", critic_key<read_elsewhere>, "Adam beta2 (see adam_beta1)"},
    {"critic.training_args.lr_scheduler_type", "critic.optim.lr_decay_style", "linear", critic_key<lr_scheduler_type>,
     "as actor_train's"},
    {"critic.training_args.warmup_steps", "critic.optim.lr_warmup_steps", "0", critic_key<warmup_steps>,
     "ROLL counts optimizer steps, verl RL steps: ceil(warmup_steps / K), K = the critic's optimizer steps per RL "
     "step (one pass over the batch)"},
    {"critic.training_args.warmup_ratio", "critic.optim.lr_warmup_steps_ratio", "", critic_key<copy<double>>,
     "warmup as a fraction of the run (when warmup_steps is 0)"},
    {"critic.training_args.per_device_train_batch_size",
     "critic.ppo_micro_batch_size_per_gpu critic.ppo_mini_batch_size", "8", critic_key<batch_sizes>,
     "as actor_train's (see its per_device_train_batch_size), dp = len(actor_train.device_mapping) / the critic's "
     "TP x PP x CP"},
    {"critic.training_args.gradient_accumulation_steps", "", "1", critic_key<read_elsewhere>,
     "micro-batches per optimizer step on each rank (see per_device_train_batch_size)"},
    {"critic.training_args.num_train_epochs", "", "", no_effect, "no effect: ROLL's RL pipeline does not read it"},
    {"critic.training_args.max_steps", "", "", no_effect, "no effect: ROLL derives it from max_steps"},
    {"critic.training_args.seed", "", "", no_effect, "no effect: ROLL replaces it with seed"},
    {"critic.strategy_args.strategy_name", "critic.strategy", "", critic_key<train_strategy>,
     "megatron_train or rlforge: rlforge's Megatron-style TrainEngine under a value head"},
    {"critic.strategy_args.strategy_config.tensor_model_parallel_size", "critic.megatron.tensor_model_parallel_size",
     "1", critic_key<copy_positive>, "TP size (the critic's own; verl's null would follow the actor's)"},
    {"critic.strategy_args.strategy_config.pipeline_model_parallel_size",
     "critic.megatron.pipeline_model_parallel_size", "1", critic_key<copy_positive>, "PP size"},
    {"critic.strategy_args.strategy_config.context_parallel_size", "critic.megatron.context_parallel_size", "1",
     critic_key<copy_positive>, "CP size"},
    {"critic.strategy_args.strategy_config.expert_model_parallel_size", "critic.megatron.expert_model_parallel_size",
     "1", critic_key<copy_positive>, "EP size"},
    {"critic.strategy_args.strategy_config.virtual_pipeline_model_parallel_size",
     "critic.megatron.virtual_pipeline_model_parallel_size", "", critic_key<copy_positive_unless_null>,
     "model chunks per pipeline rank, run interleaved (null: none)"},
    {"critic.strategy_args.strategy_config.num_layers_in_first_pipeline_stage",
     "critic.megatron.num_layers_in_first_pipeline_stage", "", critic_key<copy_positive_unless_null>,
     "decoder layers on pipeline rank 0 (null: even split)"},
    {"critic.strategy_args.strategy_config.num_layers_in_last_pipeline_stage",
     "critic.megatron.num_layers_in_last_pipeline_stage", "", critic_key<copy_positive_unless_null>,
     "decoder layers on the last pipeline rank (null: even split)"},
    {"critic.strategy_args.strategy_config.account_for_embedding_in_pipeline_split",
     "critic.megatron.account_for_embedding_in_pipeline_split", "", critic_key<copy<bool>>,
     "count the embedding as a layer of the split"},
    {"critic.strategy_args.strategy_config.account_for_loss_in_pipeline_split",
     "critic.megatron.account_for_loss_in_pipeline_split", "", critic_key<copy<bool>>,
     "count the output layer and loss as a layer of the split"},
    {"critic.strategy_args.strategy_config.pipeline_model_parallel_layout",
     "critic.megatron.pipeline_model_parallel_layout", "", critic_key<copy<std::string>>,
     "every virtual stage's layers, e.g. \"Et|(tt|)*3,L\""},
    {"critic.strategy_args.strategy_config.microbatch_group_size_per_vp_stage",
     "critic.megatron.microbatch_group_size_per_vp_stage", "", critic_key<copy_positive_unless_null>,
     "interleaved 1F1B: micro-batches per virtual stage in a row (null: the PP size)"},
    {"critic.strategy_args.strategy_config.expert_tensor_parallel_size", "", "", critic_key<only_one>,
     "1 or null only"},
    {"critic.strategy_args.strategy_config.sequence_parallel", "critic.megatron.sequence_parallel", "false",
     critic_key<copy<bool>>, "sequence parallelism (with TP > 1)"},
    {"critic.strategy_args.strategy_config.use_distributed_optimizer", "critic.megatron.use_distributed_optimizer",
     "false", critic_key<copy<bool>>, "ZeRO-1 over DP"},
    {"critic.strategy_args.strategy_config.overlap_grad_reduce", "critic.megatron.overlap_grad_reduce", "false",
     critic_key<copy<bool>>, "overlap DP reductions with the backward"},
    {"critic.strategy_args.strategy_config.overlap_param_gather", "critic.megatron.overlap_param_gather", "false",
     critic_key<copy<bool>>, "overlap the distributed optimizer's gathers with the forward"},
    {"critic.strategy_args.strategy_config.recompute_granularity", "critic.megatron.recompute_granularity", "",
     critic_key<copy<std::string>>, "activation recompute: full or selective"},
    {"critic.strategy_args.strategy_config.recompute_method", "critic.megatron.recompute_method", "",
     critic_key<copy<std::string>>, "with full: uniform or block"},
    {"critic.strategy_args.strategy_config.recompute_num_layers", "critic.megatron.recompute_num_layers", "",
     critic_key<copy_positive_unless_null>, "with full: the group size (uniform) or layers per chunk (block)"},
    {"critic.strategy_args.strategy_config.recompute_modules", "critic.megatron.recompute_modules", "",
     critic_key<copy<std::vector<std::string>>>, "with selective: core_attn, layernorm, mlp"},
    {"critic.strategy_args.strategy_config.distribute_saved_activations", "critic.megatron.distribute_saved_activations",
     "false", critic_key<copy<bool>>, "with full at TP > 1: each TP rank keeps 1/TP of a recomputed group's input"},
    {"critic.strategy_args.strategy_config.max_grad_norm", "critic.optim.clip_grad", "", critic_key<copy<double>>,
     "global gradient-norm clip"},
    {"critic.strategy_args.strategy_config.adam_epsilon", "critic.optim.eps", "", critic_key<copy<double>>,
     "Adam epsilon"},
    {"critic.strategy_args.strategy_config.lr_scheduler_kwargs.min_lr", "critic.optim.min_lr", "",
     critic_key<copy<double>>, "learning rate at the end of the decay"},
    {"critic.device_mapping", "critic.device_mapping", "", critic_key<critic_device_mapping>,
     "the critic's ranks (absent: actor_train's), the same forms"},
    {"critic.infer_batch_size", "", "", no_effect,
     "no effect: the values pass takes the critic's train micro-batch (per_device_train_batch_size)"},
    // --- validation: its sampling (the prompts are the task's held-out split)
    {"validation.generating_args.max_new_tokens", "", "", equals_response_length, "the response length"},
    {"validation.generating_args.temperature", "actor_rollout_ref.rollout.val_kwargs.temperature", "0.95", copy<double>,
     "validation temperature"},
    {"validation.generating_args.top_p", "actor_rollout_ref.rollout.val_kwargs.top_p", "0.7", copy<double>,
     "validation top-p"},
    {"validation.generating_args.top_k", "actor_rollout_ref.rollout.val_kwargs.top_k", "50", top_k,
     "validation top-k (-1 or 0: off)"},
    {"validation.generating_args.do_sample", "actor_rollout_ref.rollout.val_kwargs.do_sample", "true", copy<bool>,
     "sample in validation (false: greedy)"},
    {"validation.generating_args.num_return_sequences", "actor_rollout_ref.rollout.val_kwargs.n", "1", copy_positive,
     "validation samples per prompt (mean@n)"},
    {"validation.generating_args.num_beams", "", "1", only_default, "1 only: no beam search"},
    // --- rewards: one entry per domain
    {"rewards.*.tag_included", "", "", tag_included,
     "the data_source values of the domain; each needs one of rlforge's rule scorers (arith, openai/gsm8k, MATH, "
     "countdown), which score every row by its data_source"},
    {"rewards.*.world_size", "", "", no_effect, "no effect: rule scorers run on rank 0's threads"},
    {"rewards.*.infer_batch_size", "", "", no_effect, "no effect: rule scorers take one response at a time"},
    // --- rlforge's own block
    {"rlforge", "", "", merge_rlforge_block,
     "rlforge's extension: verl keys no ROLL key sets, in verl's tree (see above)"},
};

}  // namespace

std::span<const RollKey> roll_keys() { return kRollKeys; }

std::vector<std::string_view> verl_keys_of(const RollKey& row) {
  std::vector<std::string_view> keys;
  for (std::string_view rest = row.verl_keys; !rest.empty();) {
    const size_t space = rest.find(' ');
    keys.push_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  return keys;
}

KeyMatch match_roll_key(std::string_view row_key, const std::vector<std::string>& parts) {
  size_t start = 0;
  for (const std::string& part : parts) {
    if (start > row_key.size()) return KeyMatch::none;  // the key is longer than the row's
    const size_t end = std::min(row_key.find('.', start), row_key.size());
    const std::string_view segment = row_key.substr(start, end - start);
    if (segment != "*" && segment != part) return KeyMatch::none;
    start = end + 1;
  }
  return start > row_key.size() ? KeyMatch::whole : KeyMatch::section;
}

const RollKey* find_roll_key(const std::string& key) {
  const std::vector<std::string> parts = config::split_dotted_key(key);
  for (const RollKey& row : kRollKeys)
    if (match_roll_key(row.key, parts) == KeyMatch::whole) return &row;
  return nullptr;
}

}  // namespace rf::apps
