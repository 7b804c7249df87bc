#include "config/bind.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "config/suggest.h"

namespace rf::config::detail {
namespace {

// The scalar text of a number field, or an error naming what was expected. A leading '+' is
// allowed (YAML allows it; from_chars does not).
std::string_view number_text(const YAML::Node& node, const std::string& path, std::string_view expected) {
  if (!node.IsScalar()) throw_expected(path, expected, node);
  std::string_view text = node.Scalar();
  if (text.starts_with('+')) text.remove_prefix(1);
  return text;
}

// from_chars over the whole text (it stops at the first character it cannot use: "1.5" as an int).
template <class N>
bool parse_whole(std::string_view text, N& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

bool is_integer_literal(std::string_view text) {
  if (text.starts_with('-')) text.remove_prefix(1);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

template <class I>
I read_integer(const YAML::Node& node, const std::string& path, I min, I max) {
  const std::string_view text = number_text(node, path, "an integer");
  I value{};
  const bool parsed = parse_whole(text, value);
  if (parsed && value >= min && value <= max) return value;
  // A well-formed integer that does not fit (too large for I, or negative for an unsigned field).
  if (parsed || is_integer_literal(text))
    throw ConfigError(path, fmt::format("expected an integer in [{}, {}], got {}", min, max, describe_node(node)));
  throw_expected(path, "an integer", node);
}

}  // namespace

std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
}

std::string element_path(const std::string& prefix, size_t index) { return fmt::format("{}[{}]", prefix, index); }

void throw_expected(const std::string& path, std::string_view expected, const YAML::Node& got) {
  throw ConfigError(path.empty() ? "<root>" : path, fmt::format("expected {}, got {}", expected, describe_node(got)));
}

void check_known_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) {
  for (const std::string& key : map_keys(map)) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const auto suggestion = suggest_nearest(key, known);
    const std::string key_path = join_path(path, key);
    if (suggestion) throw ConfigError(key_path, fmt::format("unknown key; did you mean '{}'?", *suggestion));
    throw ConfigError(key_path, fmt::format("unknown key; known keys: {}", fmt::join(known, ", ")));
  }
}

void rethrow_under(const ConfigError& error, const std::string& path) {
  const std::string& detail = error.detail();
  const std::string key = error.key_path().empty() ? path : join_path(path, error.key_path());
  throw ConfigError(key.empty() ? "<root>" : key, detail);
}

bool read_bool(const YAML::Node& node, const std::string& path) {
  // YAML 1.2's core-schema spellings (verl's files, written from Python, say True and False); yes/no/on/off
  // (YAML 1.1) are too easy to get by accident.
  if (!node.IsScalar()) throw_expected(path, "true or false", node);
  const std::string& text = node.Scalar();
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  throw_expected(path, "true or false", node);
}

int64_t read_signed(const YAML::Node& node, const std::string& path, int64_t min, int64_t max) {
  return read_integer<int64_t>(node, path, min, max);
}

uint64_t read_unsigned(const YAML::Node& node, const std::string& path, uint64_t max) {
  return read_integer<uint64_t>(node, path, 0, max);
}

double read_double(const YAML::Node& node, const std::string& path) {
  // Finite only: no config value means anything at infinity or NaN, and an .inf learning rate or
  // temperature would otherwise pass every `>= 0` check downstream. from_chars also reads "inf" and
  // "nan", and refuses a value out of double's range ("1e999").
  const std::string_view text = number_text(node, path, "a finite number");
  double value = 0;
  if (parse_whole(text, value) && std::isfinite(value)) return value;
  throw_expected(path, "a finite number", node);
}

std::string read_string(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) throw_expected(path, "a string", node);
  return node.Scalar();
}

void throw_not_one_of(const std::string& path, const std::vector<std::string>& names, const YAML::Node& got) {
  std::string message = fmt::format("expected one of {}, got {}", fmt::join(names, ", "), describe_node(got));
  const auto suggestion = got.IsScalar() ? suggest_nearest(got.Scalar(), names) : std::nullopt;
  if (suggestion) message += fmt::format("; did you mean '{}'?", *suggestion);
  throw ConfigError(path, message);
}

std::string format_double(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  // Shortest text that reads back to the same double, so bind(to_yaml(x)) == x exactly.
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  // "1" would read as an integer to a person (and to verl's PyYAML); keep floats looking like floats.
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string integer_type_name(bool is_signed, size_t num_bits) {
  if (is_signed && num_bits == 32) return "int";
  return fmt::format("{}int{}", is_signed ? "" : "u", num_bits);
}

std::string markdown_cell(std::string_view text) {
  std::string cell;
  for (const char c : text) {
    if (c == '|') cell += "\\|";
    else cell += c == '\n' ? ' ' : c;
  }
  return cell;
}

std::string table_header(const std::string& path) {
  return fmt::format("\n### `{}`\n\n| key | type | default | description |\n|---|---|---|---|\n",
                     path.empty() ? "(top level)" : path);
}

}  // namespace rf::config::detail
