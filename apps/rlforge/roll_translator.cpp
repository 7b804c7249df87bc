#include "apps/rlforge/roll_translator.h"

#include <fmt/format.h>

#include <algorithm>

#include "apps/rlforge/roll_config_keys.h"
#include "config/yaml_util.h"
#include "core/error.h"

namespace rf::apps {

RollTranslator::RollTranslator(YAML::Node roll, std::string source)
    : roll_(std::move(roll)), source_(std::move(source)), verl_(YAML::NodeType::Map) {}

bool RollTranslator::in_file(const std::string& key) const { return config::node_at_path(roll_, key).IsDefined(); }

bool RollTranslator::has_section(const std::string& section) const { return config::node_at_path(roll_, section).IsMap(); }

YAML::Node RollTranslator::value(const std::string& key) const {
  const YAML::Node in_roll = config::node_at_path(roll_, key);
  if (in_roll.IsDefined()) return in_roll;
  const RollKey* row = find_roll_key(key);
  const std::vector<std::string> parts = config::split_dotted_key(key);
  if (row == nullptr || row->roll_default.empty() || (parts.size() > 1 && !has_section(parts[0])))
    return YAML::Node(YAML::NodeType::Undefined);
  return YAML::Load(std::string(row->roll_default));
}

void RollTranslator::set(const std::string& verl_key, const YAML::Node& value) {
  RF_CHECK(row_ != nullptr, "RollTranslator::set({}) outside a row", verl_key);
  RF_CHECK(std::ranges::count(verl_keys_of(*row_), verl_key) == 1,
           "ROLL row {} sets {}, which its verl_keys do not declare", row_->key, verl_key);
  set_extension(verl_key, value);
}

void RollTranslator::set_extension(const std::string& verl_key, const YAML::Node& value) {
  // Handles are rebound with reset(): assigning one yaml-cpp node to another would alias them.
  YAML::Node node = verl_;
  const std::vector<std::string> parts = config::split_dotted_key(verl_key);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!config::find_child(node, parts[i]).IsMap()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    node.reset(config::find_child(node, parts[i]));
  }
  RF_CHECK(!config::find_child(node, parts.back()).IsDefined(), "verl key {} set twice", verl_key);
  node[parts.back()] = YAML::Clone(value);
}

void RollTranslator::fail(const std::string& key, const std::string& detail) const {
  throw ConfigError(key, fmt::format("{} (ROLL config {})", detail, source_));
}

void RollTranslator::rekeyed(const std::string& key, const std::function<void()>& check) const {
  try {
    check();
  } catch (const ConfigError& error) {
    fail(key, error.detail());
  }
}

}  // namespace rf::apps
