#include "config/yaml_json.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace rf::config {
namespace {

size_t count_digits(std::string_view text, size_t& pos) {
  const size_t start = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  return pos - start;
}

std::string_view without_sign(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  return text;
}

// YAML 1.2's core schema, written out rather than as std::regex, whose recursive matcher overflows the
// stack on a long scalar: int [-+]?[0-9]+, float [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?.
bool is_core_integer(std::string_view text) {
  text = without_sign(text);
  size_t pos = 0;
  return count_digits(text, pos) > 0 && pos == text.size();
}

bool is_core_float(std::string_view text) {
  text = without_sign(text);
  size_t pos = 0;
  const size_t whole_digits = count_digits(text, pos);
  size_t fraction_digits = 0;
  if (pos < text.size() && text[pos] == '.') fraction_digits = count_digits(text, ++pos);
  if (whole_digits == 0 && fraction_digits == 0) return false;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) ++pos;
    if (count_digits(text, pos) == 0) return false;
  }
  return pos == text.size();
}

nlohmann::json scalar_to_json(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted in the YAML source: always a string
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  if (is_core_integer(text)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+');
    if (std::from_chars(begin, text.data() + text.size(), value).ec == std::errc()) return value;
    // Beyond int64: read as a float below, as the JSON readers of such configs would.
  }
  // strtod rather than from_chars: out of range it gives +-inf or 0 as PyYAML does ("1e999" is inf),
  // where from_chars only reports the error. The text is digits, sign, '.' and 'e', so the locale's
  // decimal point is '.' in the C locale rlforge runs in.
  if (is_core_float(text)) return std::strtod(text.c_str(), nullptr);
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
