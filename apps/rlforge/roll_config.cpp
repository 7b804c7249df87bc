// The translation driver: resolves ROLL's ${key} references, checks every key of the file against the
// table, runs the table's rows in order over a RollTranslator, then checks the placement. The rows
// themselves (what each ROLL key becomes) are roll_config_keys.cpp's.
#include "apps/rlforge/roll_config.h"

#include <fmt/format.h>

#include "apps/rlforge/roll_config_keys.h"
#include "apps/rlforge/roll_translator.h"
#include "config/bind.h"
#include "config/suggest.h"
#include "config/yaml_util.h"
#include "core/error.h"
#include "core/log.h"

namespace rf::apps {
namespace {

// --- ${key} references (OmegaConf's interpolation, the one form ROLL's examples use)

struct References {
  const YAML::Node& root;
  const std::string& source;
  std::vector<std::string> resolving;  // the chain being resolved, to report a cycle
};

YAML::Node resolve(const YAML::Node& node, const std::string& path, References& refs);

// The resolved value of `${name}`, found while resolving the key `path`.
YAML::Node referenced(const std::string& name, const std::string& path, References& refs) {
  const auto fail = [&](const std::string& detail) {
    throw ConfigError(path, fmt::format("${{{}}}: {} (ROLL config {})", name, detail, refs.source));
  };
  if (name.empty() || name.find_first_of(":${} ") != std::string::npos)
    fail("only ${key} references to other keys of this file are supported, not OmegaConf's resolvers");
  const YAML::Node target = config::node_at_path(refs.root, name);
  if (!target.IsDefined()) fail("no such key in this file");
  if (std::ranges::find(refs.resolving, name) != refs.resolving.end())
    fail(fmt::format("a cycle of references: {} -> {}", fmt::join(refs.resolving, " -> "), name));
  refs.resolving.push_back(name);
  YAML::Node value = resolve(target, name, refs);
  refs.resolving.pop_back();
  return value;
}

YAML::Node resolve_scalar(const YAML::Node& node, const std::string& path, References& refs) {
  const std::string& text = node.Scalar();
  if (text.find("${") == std::string::npos) return YAML::Clone(node);
  const size_t close = text.find('}');
  if (text.starts_with("${") && close == text.size() - 1) return referenced(text.substr(2, close - 2), path, refs);
  std::string out;  // references inside a longer string: their text is substituted
  size_t start = 0;
  for (size_t open = text.find("${"); open != std::string::npos; open = text.find("${", start)) {
    const size_t end = text.find('}', open);
    if (end == std::string::npos)
      throw ConfigError(path, fmt::format("'{}': an unclosed ${{ (ROLL config {})", text, refs.source));
    const YAML::Node value = referenced(text.substr(open + 2, end - open - 2), path, refs);
    if (!value.IsScalar())
      throw ConfigError(path, fmt::format("'{}': a reference inside a string must name a scalar, got {} (ROLL "
                                          "config {})",
                                          text, config::describe_node(value), refs.source));
    out += text.substr(start, open - start) + value.Scalar();
    start = end + 1;
  }
  return YAML::Node(out + text.substr(start));
}

// A copy with every reference resolved; maps and lists keep their style, so a subtree passed on whole
// prints as the file wrote it.
YAML::Node resolve(const YAML::Node& node, const std::string& path, References& refs) {
  if (node.IsMap()) {
    YAML::Node map(YAML::NodeType::Map);
    for (const std::string& key : config::map_keys(node))
      map[key] = resolve(config::find_child(node, key), path.empty() ? key : path + "." + key, refs);
    map.SetStyle(node.Style());
    return map;
  }
  if (node.IsSequence()) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (size_t i = 0; i < node.size(); ++i) list.push_back(resolve(node[i], fmt::format("{}[{}]", path, i), refs));
    list.SetStyle(node.Style());
    return list;
  }
  return node.IsScalar() ? resolve_scalar(node, path, refs) : YAML::Clone(node);
}

// --- the file's keys against the table

// Every key of the file is a row of the table or on the way to one.
void check_keys(const YAML::Node& map, const std::string& path, const std::string& source) {
  std::vector<std::string> parts = path.empty() ? std::vector<std::string>{} : config::split_dotted_key(path);
  const auto best_match = [&] {
    KeyMatch best = KeyMatch::none;
    for (const RollKey& row : roll_keys()) best = std::max(best, match_roll_key(row.key, parts));
    return best;
  };
  for (const std::string& name : config::map_keys(map)) {
    const std::string key = path.empty() ? name : path + "." + name;
    parts.push_back(name);
    const KeyMatch match = best_match();
    parts.pop_back();
    if (match == KeyMatch::whole) continue;  // a row: its converter reads the value
    if (match == KeyMatch::none) {
      std::vector<std::string> known;  // the names the table has at this level
      for (const RollKey& row : roll_keys()) {
        if (match_roll_key(row.key, parts) != KeyMatch::section) continue;
        const std::string next = config::split_dotted_key(std::string(row.key))[parts.size()];
        if (next != "*" && std::ranges::find(known, next) == known.end()) known.push_back(next);
      }
      const auto suggestion = config::suggest_nearest(name, known);
      throw ConfigError(key, fmt::format("not a ROLL key rlforge reads (docs/config.md lists them; ROLL config "
                                         "{}){}",
                                         source, suggestion ? fmt::format("; did you mean '{}'?", *suggestion) : ""));
    }
    const YAML::Node child = config::find_child(map, name);
    if (child.IsNull()) continue;  // ROLL's optional sections: null is none (`strategy_config: ~`)
    if (!child.IsMap())
      throw ConfigError(key, fmt::format("expected a map (ROLL's section), got {} (ROLL config {})",
                                         config::describe_node(child), source));
    check_keys(child, key, source);
  }
}

// The file's keys matching a `*` row, e.g. rewards.math.tag_included for rewards.*.tag_included.
void expand(const YAML::Node& node, const std::vector<std::string>& pattern, size_t depth, const std::string& path,
            std::vector<std::string>& out) {
  if (depth == pattern.size()) {
    out.push_back(path);
    return;
  }
  for (const std::string& name : config::map_keys(node)) {
    if (pattern[depth] != "*" && pattern[depth] != name) continue;
    expand(config::find_child(node, name), pattern, depth + 1, path.empty() ? name : path + "." + name, out);
  }
}

}  // namespace

bool is_roll_config(const YAML::Node& root) {
  return config::find_child(root, "actor_train").IsDefined() || config::find_child(root, "actor_infer").IsDefined();
}

RollConfig translate_roll_config(const YAML::Node& roll, const std::string& source) {
  References refs{roll, source, {}};
  const YAML::Node resolved = resolve(roll, "", refs);
  check_keys(resolved, "", source);
  RollTranslator t(resolved, source);
  for (const RollKey& row : roll_keys()) {
    t.begin_row(row);
    if (row.key.find('*') == std::string_view::npos) {
      row.convert(t, std::string(row.key));
      continue;
    }
    std::vector<std::string> keys;
    expand(resolved, config::split_dotted_key(std::string(row.key)), 0, "", keys);
    for (const std::string& key : keys) row.convert(t, key);
  }
  if (!t.no_effect_keys().empty())
    core::log_warning("ROLL keys with no effect in rlforge, accepted (docs/config.md says why): {}",
                      fmt::join(t.no_effect_keys(), ", "));
  return {t.verl(), t.device_mapping()};
}

std::string document_roll_config() {
  std::string out =
      "## ROLL-style configs for `rlforge train`\n\n"
      "A config whose top level has `actor_train` or `actor_infer` is read as ROLL's (alibaba/ROLL's RLVR "
      "pipeline, `rlvr_config.yaml`). It is translated into the verl keys above and from there runs as a verl "
      "config: rlforge's defaults under it, then the dotted command-line overrides, which are verl keys "
      "(`trainer.total_training_steps=10`, not `max_steps=10`), then the same checks. `--check-config` prints the "
      "verl keys it became. `examples/roll_grpo_arith.yaml` is the main job written this way, "
      "`examples/roll_ppo_arith.yaml` its PPO with a critic (`examples/ppo_arith.yaml`).\n\n"
      "- Only the ROLL keys below are read; any other key is an error naming its ROLL path and the file (with a "
      "\"did you mean\"), and so is a listed key at a value rlforge cannot honour. A key whose meaning starts "
      "with \"no effect\" is accepted with a warning: a memory or speed knob of ROLL's backends, or a key ROLL "
      "itself overrides. Errors found after the translation name verl keys.\n"
      "- Where ROLL's default differs from verl's the file means ROLL's: the ROLL default below applies when the "
      "key is absent (a role's keys only when the file has that role's section; without a `reference` section "
      "the reference follows the actor's engine settings).\n"
      "- `${key}` references to other keys of the file are resolved as OmegaConf does (`max_new_tokens: "
      "${response_length}`); OmegaConf's other resolvers are errors.\n"
      "- `strategy_name` is `megatron_train` / `megatron_infer` (rlforge's Megatron-style engines) or `rlforge`; "
      "vllm, sglang, deepspeed, fsdp2 and hf_infer are errors: rlforge runs its own engines.\n"
      "- `device_mapping` is a list of ranks or the string `list(range(a, b))` (or `list(range(a, b, step))`); "
      "no other Python is evaluated. `actor_train.device_mapping` is required (its size sets the data-parallel "
      "size of the batch arithmetic); a role without one shares actor_train's ranks. The ranks become rlforge's "
      "placement keys (`actor_rollout_ref.{actor,rollout,ref}.device_mapping`, `critic.device_mapping`), checked "
      "against the job's world (`--nproc n`).\n"
      "- `rewards`: each domain's `tag_included` lists data_source values; rlforge scores every row with the rule "
      "scorer of its data_source, so each tag needs one, and the built-in task's data_source (its name) must be "
      "among the tags.\n"
      "- `rlforge:` is rlforge's extension: verl keys, in verl's tree, that no ROLL key sets — the built-in task "
      "(`data.task`, `data.task_kwargs`, `data.val_size`, `data.seed`), `trainer.deterministic`, "
      "`trainer.time_budget_s`, `trainer.project_name`, `trainer.num_threads`, `resources.device_memory_gb`, .... A "
      "verl key some row below sets is an error there, so each setting has one spelling. It is a verl-shaped "
      "block because ROLL's `data_args` describe dataset files in ROLL's own columns, which rlforge does not read, "
      "and rlforge's own settings have no ROLL spelling; verl's tree already names and documents each of them.\n"
      "- `critic` is read only with `adv_estimator: gae` (ROLL builds its critic only then; otherwise its keys have "
      "no effect), and gae needs it. Where verl's critic keys follow the actor's when null, a ROLL critic section "
      "has its own values, ROLL's defaults included (dtype, parallel sizes, optimizer, one pass per step).\n\n"
      "| ROLL key | ROLL default | verl key(s) | meaning in rlforge |\n|---|---|---|---|\n";
  for (const RollKey& row : roll_keys()) {
    std::string verl_keys;
    for (const std::string_view key : verl_keys_of(row))
      verl_keys += fmt::format("{}`{}`", verl_keys.empty() ? "" : "<br>", key);
    out += fmt::format("| `{}` | {} | {} | {} |\n", row.key,
                       row.roll_default.empty() ? "" : fmt::format("`{}`", row.roll_default),
                       verl_keys.empty() ? "—" : verl_keys, config::detail::markdown_cell(row.meaning));
  }
  return out;
}

}  // namespace rf::apps
