#include "apps/rlforge/roll_extension.h"

#include <fmt/format.h>

#include <algorithm>

#include "rl/trainer/rl_config.h"
#include "apps/rlforge/roll_config_keys.h"
#include "apps/rlforge/roll_translator.h"
#include "config/bind.h"
#include "config/suggest.h"
#include "config/yaml_util.h"

namespace rf::apps {
namespace {

// The ROLL row that sets `verl_key`, if any.
const RollKey* row_setting(const std::string& verl_key) {
  for (const RollKey& row : roll_keys())
    if (std::ranges::count(verl_keys_of(row), verl_key) > 0) return &row;
  return nullptr;
}

// `block` against `schema` (rlforge's train config with its defaults), one map level at a time; a key
// whose schema value is not a map (a scalar, a list, a free-form subtree) is merged whole.
void merge(RollTranslator& t, const YAML::Node& block, const YAML::Node& schema, const std::string& verl_prefix,
           const std::string& roll_prefix) {
  for (const std::string& name : config::map_keys(block)) {
    const std::string verl_key = verl_prefix.empty() ? name : verl_prefix + "." + name;
    const std::string roll_key = roll_prefix + "." + name;
    const YAML::Node in_schema = config::find_child(schema, name);
    if (!in_schema.IsDefined()) {
      const auto suggestion = config::suggest_nearest(name, config::map_keys(schema));
      t.fail(roll_key, fmt::format("'{}' is not a key of `rlforge train`'s config (docs/config.md){}", verl_key,
                                   suggestion ? fmt::format("; did you mean '{}'?", *suggestion) : ""));
    }
    if (const RollKey* row = row_setting(verl_key))
      t.fail(roll_key, fmt::format("{} has a ROLL key, {}: set it there", verl_key, row->key));
    const YAML::Node value = config::find_child(block, name);
    if (!in_schema.IsMap()) {
      t.set_extension(verl_key, value);
    } else if (value.IsMap()) {
      merge(t, value, in_schema, verl_key, roll_key);
    } else {
      t.fail(roll_key,
             fmt::format("expected a map (verl's section {}), got {}", verl_key, config::describe_node(value)));
    }
  }
}

// rlforge scores a row by its data_source; a built-in task's data_source is the task's name.
void check_rewards_cover_task(const RollTranslator& t) {
  const YAML::Node rewards = config::node_at_path(t.roll(), "rewards");
  const YAML::Node data = config::find_child(t.verl(), "data");
  const YAML::Node train_files = config::find_child(data, "train_files");
  if (!rewards.IsMap() || (train_files.IsDefined() && !train_files.IsNull())) return;
  rl::RlDataConfig task_config;
  if (const YAML::Node task = config::find_child(data, "task"); task.IsDefined())
    t.rekeyed("rlforge.data.task",
              [&] { task_config.task = config::bind<decltype(task_config.task)>(task, "rlforge.data.task"); });
  const std::string task = task_config.builtin_task();
  std::vector<std::string> tags;
  for (const std::string& domain : config::map_keys(rewards))
    for (const YAML::Node& tag : config::node_at_path(rewards, domain + ".tag_included")) tags.push_back(tag.Scalar());
  if (std::ranges::find(tags, task) == tags.end())
    t.fail("rewards", fmt::format("no domain's tag_included names '{}', the data_source of the built-in task "
                                  "(rlforge.data.task), so its responses could not be rewarded; tags: [{}]",
                                  task, fmt::join(tags, ", ")));
}

}  // namespace

void merge_rlforge_block(RollTranslator& t, const std::string& key) {
  const YAML::Node block = t.value(key);
  if (block.IsDefined()) {
    if (!block.IsMap())
      t.fail(key,
             fmt::format("expected a map of verl keys (rlforge's extension), got {}", config::describe_node(block)));
    const rl::RlConfig defaults;
    merge(t, block, config::to_yaml(defaults), "", key);
  }
  check_rewards_cover_task(t);
}

}  // namespace rf::apps
