#include "config/yaml_json.h"

#include <charconv>
#include <regex>

namespace rf::config {
namespace {

nlohmann::json scalar_to_json(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted in the YAML source: always a string
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex real(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(text, integer)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+');
    if (std::from_chars(begin, text.data() + text.size(), value).ec == std::errc()) return value;
  }
  if (std::regex_match(text, real)) return std::stod(text);
  return text;
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return nullptr;
  if (node.IsScalar()) return scalar_to_json(node);
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& item : node) out[item.first.as<std::string>()] = yaml_to_json(item.second);
  return out;
}

}  // namespace rf::config
