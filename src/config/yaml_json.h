// YAML -> JSON for the free-form config subtrees that feed JSON-speaking code (a model's HF
// config.json fields, task kwargs). Scalars become numbers, booleans or null when they read as such
// in YAML 1.2's core schema, strings otherwise; a float beyond double's range is +-inf, as PyYAML
// reads it, for the consumer's range check to name. Map keys must be scalars, as ConfigTree ensures
// (yaml_checks.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace rf::config {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace rf::config
