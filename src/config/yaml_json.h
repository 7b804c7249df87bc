// YAML -> JSON for the free-form config subtrees that feed JSON-speaking code (a model's HF
// config.json fields, task kwargs). Scalars become numbers, booleans or null when they read as such
// in YAML 1.2's core schema, strings otherwise.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace rf::config {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace rf::config
