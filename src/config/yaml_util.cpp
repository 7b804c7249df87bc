#include "config/yaml_util.h"

#include <fmt/format.h>

namespace rf::config {
namespace {

constexpr size_t kMaxShownChars = 60;

std::string shortened(std::string text) {
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars - 3) + "...";
  return text;
}

}  // namespace

YAML::Node find_child(const YAML::Node& map, std::string_view key) {
  if (map.IsMap()) {
    for (const auto& entry : map) {
      if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.second;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::vector<std::string> map_keys(const YAML::Node& map) {
  std::vector<std::string> keys;
  if (map.IsMap()) {
    for (const auto& entry : map) keys.push_back(entry.first.Scalar());
  }
  return keys;
}

std::string flow_yaml(const YAML::Node& node) {
  YAML::Emitter emitter;
  emitter.SetMapFormat(YAML::Flow);
  emitter.SetSeqFormat(YAML::Flow);
  emitter.SetNullFormat(YAML::LowerNull);
  emitter << node;
  return emitter.c_str();
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return fmt::format("'{}'", shortened(node.Scalar()));
  return fmt::format("the {} {}", node.IsSequence() ? "list" : "map", shortened(flow_yaml(node)));
}

}  // namespace rf::config
