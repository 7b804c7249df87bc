#include "config/yaml_util.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

namespace rf::config {
namespace {

constexpr size_t kMaxShownChars = 60;

std::string shortened(std::string text) {
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars - 3) + "...";
  return text;
}

std::optional<bool> as_bool(const std::string& text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

std::optional<double> as_number(std::string_view text) {
  if (text.starts_with('+')) text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::string> split_dotted_key(std::string_view dotted) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    parts.emplace_back(dotted.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

YAML::Node node_at_path(const YAML::Node& root, std::string_view dotted) {
  YAML::Node node = root;
  if (dotted.empty()) return node;
  // reset() rebinds the handle; assigning would overwrite the node it points to.
  for (const std::string& part : split_dotted_key(dotted)) node.reset(find_child(node, part));
  return node;
}

bool same_yaml_value(const YAML::Node& a, const YAML::Node& b) {
  if (!a.IsDefined() || !b.IsDefined()) return !a.IsDefined() && !b.IsDefined();
  if (a.IsNull() || b.IsNull()) return a.IsNull() && b.IsNull();
  if (a.IsScalar() && b.IsScalar()) {
    if (const auto x = as_bool(a.Scalar()), y = as_bool(b.Scalar()); x || y) return x == y;
    if (const auto x = as_number(a.Scalar()), y = as_number(b.Scalar()); x && y) return *x == *y;
    return a.Scalar() == b.Scalar();
  }
  if (a.IsSequence() && b.IsSequence()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_yaml_value(a[i], b[i])) return false;
    return true;
  }
  if (a.IsMap() && b.IsMap()) {
    if (a.size() != b.size()) return false;
    for (const std::string& key : map_keys(a)) {
      const YAML::Node other = find_child(b, key);
      if (!other.IsDefined() || !same_yaml_value(find_child(a, key), other)) return false;
    }
    return true;
  }
  return false;
}

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
