// The table of verl keys rlforge does not implement and the pass that applies it. Defaults are verl's
// at the commit the spec follows (spec verl.md §3.5, §3.10, §3.11, §4); where the spec names a key
// without its default, verl's generated ppo_megatron_trainer.yaml gave it (all nulls, flags and
// paths there). Subtrees verl repeats per role (profiler, megatron extras, optim extras) are built once.
#include "apps/rlforge/rl_config_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "rl/trainer/rl_config.h"
#include "config/bind.h"
#include "config/suggest.h"
#include "config/yaml_util.h"
#include "core/error.h"
#include "core/log.h"

namespace rf::apps {
namespace {

using Leaves = std::vector<std::pair<std::string, std::string>>;  // (key under a prefix, verl default)

void add(std::vector<UnimplementedVerlKey>& keys, const std::string& prefix, const Leaves& leaves) {
  for (const auto& [key, verl_default] : leaves) keys.push_back({prefix + "." + key, verl_default});
}

// actor_rollout_ref.{actor, ref}.profiler, critic.profiler, reward_model.profiler (tool and save_path
// are interpolations of global_profiler's).
void add_profiler(std::vector<UnimplementedVerlKey>& keys, const std::string& role) {
  add(keys, role + ".profiler", {{"enable", "false"}, {"all_ranks", "false"}, {"ranks", "[]"}});
}

// The megatron keys of verl's McoreEngineConfig that rlforge's EngineConfig does not have.
void add_megatron_extras(std::vector<UnimplementedVerlKey>& keys, const std::string& role, bool forward_only) {
  add(keys, role + ".megatron",
      {{"use_dist_checkpointing", "false"},
       {"dist_checkpointing_path", "null"},
       {"dist_checkpointing_prefix", "''"},
       {"override_ddp_config", "{}"},
       {"override_transformer_config.recompute_modules", "[core_attn]"},
       {"override_transformer_config.attention_backend", "flash"},
       {"override_mcore_model_config", "{}"},
       {"use_mbridge", "true"},
       {"vanilla_mbridge", "true"},
       {"use_remove_padding", "true"},
       {"forward_only", forward_only ? "true" : "false"}});
}

// The optim keys of verl's McoreOptimizerConfig that rlforge's OptimConfig does not have.
void add_optim_extras(std::vector<UnimplementedVerlKey>& keys, const std::string& role) {
  add(keys, role + ".optim",
      {{"weight_decay_incr_style", "constant"},
       {"lr_wsd_decay_style", "exponential"},
       {"lr_wsd_decay_steps", "null"},
       {"use_checkpoint_opt_param_scheduler", "false"},
       {"override_optimizer_config", "{}"}});
}

void add_checkpoint(std::vector<UnimplementedVerlKey>& keys, const std::string& role) {
  add(keys, role + ".checkpoint", {{"save_contents", "[model, optimizer, extra]"}, {"async_save", "false"}});
}

void add_model_extras(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "actor_rollout_ref", {{"nccl_timeout", "600"}});
  add(keys, "actor_rollout_ref.model",
      {{"hf_config_path", "null"},
       {"trust_remote_code", "false"},
       {"custom_chat_template", "null"},
       {"external_lib", "null"},
       {"override_config.model_config", "{}"},
       {"override_config.moe_config.freeze_moe_router", "false"},
       {"enable_gradient_checkpointing", "true"},
       {"use_remove_padding", "false"},
       {"use_fused_kernels", "false"},
       {"lora.rank", "0"},
       {"lora.alpha", "32"},
       {"lora.dropout", "0"},
       {"lora.target_modules", "[linear_qkv, linear_proj, linear_fc1, linear_fc2]"},
       {"lora.dropout_position", "pre"},
       {"lora.freeze_language_model", "true"},
       {"mtp.enable", "false"},
       {"mtp.mtp_loss_scaling_factor", "0.1"}});
}

void add_actor_and_ref_extras(std::vector<UnimplementedVerlKey>& keys) {
  const std::string actor = "actor_rollout_ref.actor";
  add(keys, actor,
      {{"ppo_micro_batch_size", "null"},
       {"load_weight", "true"},
       {"freeze_vision_tower", "false"},
       {"use_torch_compile", "true"},
       {"policy_loss.clip_cov_ratio", "0.0002"},
       {"policy_loss.clip_cov_lb", "1.0"},
       {"policy_loss.clip_cov_ub", "5.0"}});
  add_checkpoint(keys, actor);
  add_profiler(keys, actor);
  add_optim_extras(keys, actor);
  add_megatron_extras(keys, actor, false);
  const std::string ref = "actor_rollout_ref.ref";
  add(keys, ref, {{"log_prob_micro_batch_size", "null"}, {"load_weight", "true"}, {"router_replay.mode", "disabled"}});
  add_profiler(keys, ref);
  add_megatron_extras(keys, ref, true);
}

void add_rollout_extras(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "actor_rollout_ref.rollout",
      {{"mode", "async"},
       {"enforce_eager", "false"},
       {"cudagraph_capture_sizes", "null"},
       {"data_parallel_size", "1"},
       {"expert_parallel_size", "1"},
       {"pipeline_model_parallel_size", "1"},
       {"max_model_len", "null"},
       {"logprobs_mode", "processed_logprobs"},
       {"load_format", "dummy"},
       {"log_prob_micro_batch_size", "null"},
       {"over_sample_rate", "0"},
       {"multi_stage_wake_up", "false"},
       {"engine_kwargs.vllm", "{}"},
       {"engine_kwargs.sglang", "{}"},
       {"engine_kwargs.trtllm", "{}"},
       {"multi_turn.enable", "false"},
       {"multi_turn.max_assistant_turns", "null"},
       {"multi_turn.max_user_turns", "null"},
       {"multi_turn.max_parallel_calls", "1"},
       {"multi_turn.max_tool_response_length", "256"},
       {"multi_turn.tool_response_truncate_side", "middle"},
       {"multi_turn.format", "hermes"},
       {"multi_turn.tool_config_path", "null"},
       {"multi_turn.interaction_config_path", "null"},
       {"multi_turn.tokenization_sanity_check_mode", "strict"},
       {"agent.num_workers", "8"},
       {"agent.default_agent_loop", "single_turn_agent"},
       {"agent.agent_loop_config_path", "null"},
       {"trace.backend", "null"},
       {"skip_rollout", "false"},
       {"quantization", "null"},
       {"layer_name_map.qkv_layer_name", "qkv"},
       {"layer_name_map.gate_proj_layer_name", "gate_up"},
       {"prometheus.enable", "false"}});
}

void add_data_extras(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "data",
      {{"tokenizer", "null"},
       {"use_shm", "false"},
       {"train_max_samples", "-1"},
       {"val_max_samples", "-1"},
       {"return_raw_input_ids", "false"},
       {"return_raw_chat", "true"},
       {"return_full_prompt", "false"},
       {"dataloader_num_workers", "8"},
       {"val_batch_size", "null"},
       {"validation_shuffle", "false"},
       {"filter_overlong_prompts_workers", "1"},
       {"image_key", "images"},
       {"video_key", "videos"},
       {"trust_remote_code", "false"},
       {"return_multi_modal_inputs", "true"},
       {"custom_cls.path", "null"},
       {"custom_cls.name", "null"},
       {"sampler.class_path", "null"},
       {"sampler.class_name", "null"},
       {"datagen.path", "null"},
       {"datagen.name", "null"},
       {"apply_chat_template_kwargs", "{}"}});
}

// The critic's keys beyond rlforge's CriticSection.
void add_critic_extras(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "critic",
      {{"ppo_micro_batch_size", "null"},
       {"nccl_timeout", "600"},
       {"load_weight", "true"},
       {"model.override_config.model_config", "{}"},
       {"model.override_config.moe_config.freeze_moe_router", "false"}});
  add_optim_extras(keys, "critic");
  add_megatron_extras(keys, "critic", false);
  add_checkpoint(keys, "critic");
  add_profiler(keys, "critic");
}

void add_reward_model(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "reward_model",
      {{"enable_resource_pool", "false"},
       {"n_gpus_per_node", "8"},
       {"nnodes", "0"},
       {"model.trust_remote_code", "false"},
       {"model.external_lib", "null"},
       {"micro_batch_size", "null"},
       {"launch_reward_fn_async", "false"},
       {"sandbox_fusion.url", "null"},
       {"sandbox_fusion.max_concurrent", "64"},
       {"sandbox_fusion.memory_limit_mb", "1024"},
       {"use_reward_loop", "true"},
       {"num_workers", "1"},
       {"nccl_timeout", "600"},
       {"load_weight", "true"}});
  add_megatron_extras(keys, "reward_model", true);
  add_profiler(keys, "reward_model");
  add(keys, "reward_manager", {{"source", "register"}});
}

void add_algorithm_and_trainer_extras(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "algorithm",
      {{"use_pf_ppo", "false"},
       {"pf_ppo.reweight_method", "pow"},
       {"pf_ppo.weight_pow", "2.0"},
       {"rollout_correction.rollout_is", "null"},
       {"rollout_correction.rollout_is_threshold", "2.0"},
       {"rollout_correction.rollout_is_batch_normalize", "false"},
       {"rollout_correction.rollout_rs", "null"},
       {"rollout_correction.rollout_rs_threshold", "null"},
       {"rollout_correction.bypass_mode", "false"},
       {"rollout_correction.loss_type", "ppo_clip"},
       {"filter_groups.enable", "false"},
       {"filter_groups.metric", "null"},
       {"filter_groups.max_num_gen_batches", "0"}});
  add(keys, "trainer",
      {{"total_epochs", "30"},
       {"esi_redundant_time", "0"},
       {"del_local_ckpt_after_load", "false"},
       {"default_hdfs_dir", "null"},
       {"ray_wait_register_center_timeout", "300"},
       {"use_legacy_worker_impl", "auto"},
       {"val_only", "false"}});
}

void add_ray_and_profiling(std::vector<UnimplementedVerlKey>& keys) {
  add(keys, "global_profiler",
      {{"tool", "null"},
       {"steps", "null"},
       {"profile_continuous_steps", "false"},
       {"save_path", "outputs/profile"},
       {"global_tool_config.nsys.discrete", "false"},
       {"global_tool_config.torch_memory.trace_alloc_max_entries", "100000"},
       {"global_tool_config.torch_memory.stack_depth", "32"},
       {"global_tool_config.torch_memory.context", "all"},
       {"global_tool_config.torch_memory.stacks", "all"}});
  for (const char* options : {"controller_nsight_options", "worker_nsight_options"})
    add(keys, std::string("global_profiler.global_tool_config.nsys.") + options,
        {{"trace", "cuda,nvtx,cublas,ucx"}, {"cuda-memory-usage", "true"}, {"cuda-graph-trace", "graph"}});
  add(keys, "global_profiler.global_tool_config.nsys.worker_nsight_options",
      {{"capture-range", "cudaProfilerApi"}, {"kill", "none"}});
  add(keys, "transfer_queue", {{"enable", "false"}});
  add(keys, "ray_kwargs", {{"ray_init.num_cpus", "null"}, {"timeline_json_file", "null"}});
}

std::vector<UnimplementedVerlKey> build_table() {
  std::vector<UnimplementedVerlKey> keys;
  add_model_extras(keys);
  add_actor_and_ref_extras(keys);
  add_rollout_extras(keys);
  add_data_extras(keys);
  add_critic_extras(keys);
  add_reward_model(keys);
  add_algorithm_and_trainer_extras(keys);
  add_ray_and_profiling(keys);
  return keys;
}

// --- walking the tree by dotted path (config/yaml_util.h walks it; these name a key's parts) ---

std::string parent_of(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? "" : key.substr(0, dot);
}

std::string last_part(const std::string& key) { return key.substr(key.rfind('.') + 1); }


// Hydra instantiation hints, on every verl section that is a dataclass; they have no meaning here.
int remove_hydra_targets(YAML::Node map) {
  if (!map.IsMap()) return 0;
  int removed = map.remove("_target_") ? 1 : 0;
  for (const std::string& key : config::map_keys(map)) removed += remove_hydra_targets(config::find_child(map, key));
  return removed;
}

// The maps above listed keys that rlforge's schema does not have (critic.checkpoint, actor.profiler, ...),
// deepest first, so emptying one can empty its parent.
std::vector<std::string> verl_only_sections(const YAML::Node& schema) {
  std::set<std::string> sections;
  for (const UnimplementedVerlKey& entry : unimplemented_verl_keys())
    for (std::string section = parent_of(entry.key); !section.empty(); section = parent_of(section))
      if (!config::node_at_path(schema, section).IsDefined()) sections.insert(section);
  std::vector<std::string> deepest_first(sections.begin(), sections.end());
  std::ranges::sort(deepest_first, std::greater{}, [](const std::string& s) { return std::ranges::count(s, '.'); });
  return deepest_first;
}

// What is left in a verl-only section after its listed keys went is a key verl's section does not
// have either (or one whose default is an interpolation, which we cannot compare).
void reject_leftover(const YAML::Node& section_node, const std::string& section, const std::vector<std::string>& sections) {
  std::vector<std::string> known;
  for (const UnimplementedVerlKey& entry : unimplemented_verl_keys())
    if (entry.key.starts_with(section + ".")) known.push_back(config::split_dotted_key(entry.key.substr(section.size() + 1))[0]);
  if (!section_node.IsMap())
    throw ConfigError(section, fmt::format("expected a map (verl's section), got {}", config::describe_node(section_node)));
  for (const std::string& key : config::map_keys(section_node)) {
    const std::string path = section + "." + key;
    if (std::ranges::find(sections, path) != sections.end()) continue;
    const auto suggestion = config::suggest_nearest(key, known);
    throw ConfigError(path, fmt::format("rlforge does not implement verl's `{}`; there it accepts only the keys "
                                        "docs/config.md lists, each at verl's default{}",
                                        section, suggestion ? fmt::format("; did you mean '{}'?", *suggestion) : ""));
  }
}

}  // namespace

const std::vector<UnimplementedVerlKey>& unimplemented_verl_keys() {
  static const std::vector<UnimplementedVerlKey> table = build_table();
  return table;
}

std::vector<std::string> reach_unimplemented_verl_keys(const std::vector<std::string>& overrides) {
  std::vector<std::string> reaching;
  for (const std::string& assignment : overrides) {
    const std::string key = assignment.substr(0, assignment.find('='));
    const bool listed = std::ranges::any_of(unimplemented_verl_keys(),
                                            [&](const UnimplementedVerlKey& entry) { return entry.key == key; });
    reaching.push_back(listed ? "++" + assignment : assignment);
  }
  return reaching;
}

void apply_verl_key_policy(config::ConfigTree& tree) {
  const YAML::Node& root = tree.root();  // a handle: removing through it edits the tree
  if (const int targets = remove_hydra_targets(root))
    core::log_warning("ignoring {} Hydra `_target_` key(s) of verl's config: rlforge's sections have fixed types",
                      targets);
  std::vector<std::string> accepted;
  for (const UnimplementedVerlKey& entry : unimplemented_verl_keys()) {
    YAML::Node parent = config::node_at_path(root, parent_of(entry.key));
    const YAML::Node value = config::find_child(parent, last_part(entry.key));
    if (!value.IsDefined()) continue;
    if (!config::same_yaml_value(value, YAML::Load(entry.verl_default)))
      throw ConfigError(entry.key, fmt::format("verl's key is not implemented by rlforge; only its default {} is "
                                               "accepted, got {}",
                                               entry.verl_default, config::flow_yaml(value)));
    parent.remove(last_part(entry.key));
    accepted.push_back(entry.key);
  }
  const std::vector<std::string> sections = verl_only_sections(config::to_yaml(rl::RlConfig{}));
  for (const std::string& section : sections) {
    YAML::Node node = config::node_at_path(root, section);
    if (!node.IsDefined()) continue;
    reject_leftover(node, section, sections);
    if (node.size() == 0) config::node_at_path(root, parent_of(section)).remove(last_part(section));
  }
  if (!accepted.empty())
    core::log_warning("verl keys rlforge does not implement, accepted at verl's default (they change nothing): {}",
                      fmt::join(accepted, ", "));
}

std::string document_unimplemented_verl_keys() {
  std::string out =
      "## verl keys `rlforge train` accepts only at verl's default\n\n"
      "verl has these keys; rlforge does not implement them. At verl's default a key is accepted with a warning "
      "(it would change nothing); any other value is an error. A key neither verl nor rlforge knows is an error.\n\n"
      "| key | verl default |\n|---|---|\n";
  for (const UnimplementedVerlKey& entry : unimplemented_verl_keys())
    out += fmt::format("| `{}` | `{}` |\n", entry.key, entry.verl_default);
  return out;
}

}  // namespace rf::apps
