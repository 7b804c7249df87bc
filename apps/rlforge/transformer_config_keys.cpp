#include "apps/rlforge/transformer_config_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <utility>

#include "config/yaml_util.h"
#include "core/error.h"

namespace rf::apps {
namespace {

// The roles with a megatron block, and the keys override_transformer_config may carry for it: Megatron's layer
// split and interleaving group (verl.md §3.6), MindSpeed's noop layers, Megatron's and MindSpeed's activation
// recompute, Megatron's activation offload, MindSpeed's optimizer-memory features, Megatron's context-parallel
// communication type, and its MoE settings (model/moe_*.h).
constexpr std::array<std::string_view, 4> kRoles = {"actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic",
                                                    "reward_model"};
constexpr std::array<std::string_view, 34> kKeys = {
    "num_layers_in_first_pipeline_stage",      "num_layers_in_last_pipeline_stage",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout",          "microbatch_group_size_per_vp_stage",
    "noop_layers",                             "recompute_granularity",
    "recompute_method",                        "recompute_num_layers",
    "recompute_modules",                       "recompute_activation_function",
    "recompute_norm",                          "distribute_saved_activations",
    "cpu_offloading",                          "cpu_offloading_num_layers",
    "cpu_offloading_activations",              "cpu_offloading_weights",
    "swap_optimizer",                          "reuse_fp32_param",
    "cp_comm_type",                            "moe_token_dispatcher_type",
    "moe_grouped_gemm",                        "moe_layer_recompute",
    "moe_shared_expert_overlap",               "moe_router_load_balancing_type",
    "moe_aux_loss_coeff",                      "moe_z_loss_coeff",
    "moe_expert_capacity_factor",              "moe_token_drop_policy",
    "moe_pad_expert_input_to_capacity",        "expert_model_parallel_size",
    "expert_tensor_parallel_size",             "moe_tp_extend_ep"};
constexpr std::string_view kSection = ".megatron.override_transformer_config.";

std::string megatron_key(std::string_view role, std::string_view key) {
  return fmt::format("{}.megatron.{}", role, key);
}
std::string transformer_config_key(std::string_view role, std::string_view key) {
  return fmt::format("{}{}{}", role, kSection, key);
}

// The megatron key an override_transformer_config spelling stands for ("" when `dotted` is none of them).
std::string megatron_key_of(const std::string& dotted) {
  for (const std::string_view role : kRoles)
    for (const std::string_view key : kKeys)
      if (dotted == transformer_config_key(role, key)) return megatron_key(role, key);
  return "";
}

[[noreturn]] void throw_given_twice(const std::string& spelled, const std::string& value, const std::string& megatron,
                                    const std::string& megatron_value) {
  throw ConfigError(spelled, fmt::format("{} differs from {} = {}: the two spellings set one key; give it once", value,
                                         megatron, megatron_value));
}

// Two override values mean the same (8 == 8.0, [1,2] == [1, 2]); text that is not YAML is left to the tree,
// which refuses it with its own message.
bool same_override_value(const std::string& a, const std::string& b) {
  try {
    return config::same_yaml_value(YAML::Load(a), YAML::Load(b));
  } catch (const YAML::Exception&) {
    return a == b;
  }
}

}  // namespace

void move_transformer_config_keys(config::ConfigTree& tree) {
  for (const std::string_view role : kRoles) {
    YAML::Node section = tree.node(fmt::format("{}.megatron.override_transformer_config", role));
    if (!section.IsMap()) continue;  // absent, or a value rl_config_policy.h refuses with its own message
    YAML::Node megatron = tree.node(fmt::format("{}.megatron", role));
    for (const std::string_view key : kKeys) {
      const YAML::Node value = config::find_child(section, key);
      if (!value.IsDefined()) continue;
      const YAML::Node given = config::find_child(megatron, key);
      if (given.IsDefined() && !config::same_yaml_value(given, value))
        throw_given_twice(transformer_config_key(role, key), config::flow_yaml(value), megatron_key(role, key),
                          config::flow_yaml(given));
      megatron[std::string(key)] = YAML::Clone(value);
      section.remove(std::string(key));
    }
  }
}

std::vector<std::string> move_transformer_config_overrides(const std::vector<std::string>& overrides) {
  // Per megatron key, the last value each spelling gave it (and the override_transformer_config key, for errors).
  struct Given {
    std::optional<std::string> plain;
    std::optional<std::pair<std::string, std::string>> moved;
  };
  std::map<std::string, Given> given;
  std::vector<std::string> out;
  for (const std::string& assignment : overrides) {
    const size_t equals = assignment.find('=');
    const std::string key = assignment.substr(0, equals);
    const std::string bare = key.substr(std::min(key.find_first_not_of('+'), key.size()));
    if (equals == std::string::npos) {  // malformed: the tree refuses it with its own message
      out.push_back(assignment);
      continue;
    }
    const std::string value = assignment.substr(equals + 1);
    if (const std::string target = megatron_key_of(bare); !target.empty()) {
      given[target].moved = {bare, value};
      out.push_back(fmt::format("++{}={}", target, value));
    } else {
      given[bare].plain = value;
      out.push_back(assignment);
    }
  }
  for (const auto& [target, g] : given)
    if (g.plain && g.moved && !same_override_value(*g.plain, g.moved->second))
      throw_given_twice(g.moved->first, g.moved->second, target, *g.plain);
  return out;
}

std::string document_transformer_config_keys() {
  std::string out =
      "## verl's `override_transformer_config` spellings `rlforge train` reads\n\n"
      "verl passes these Megatron (and MindSpeed) settings in `<role>.megatron.override_transformer_config`; rlforge "
      "keeps them in the megatron block, and reads them in either place for the actor, the reference, the critic "
      "and the reward model. The same key given both ways with different values is an error; an override in either "
      "spelling replaces the file's value.\n\n"
      "| key | read as |\n|---|---|\n";
  for (const std::string_view key : kKeys)
    out += fmt::format("| `<role>{}{}` | `<role>.megatron.{}` |\n", kSection, key, key);
  return out;
}

}  // namespace rf::apps
