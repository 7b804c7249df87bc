#include "data/tokenizer_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer_json.h"

namespace rf::data {
namespace {

using nlohmann::json;

// A token is written as its text, as an AddedToken object {"content": ..., ...}, or null.
std::optional<std::string> token_text(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  throw IoError(path, fmt::format("{}: expected a string, {{\"content\": ...}} or null, got {}", key, v.dump()));
}

// A single template, or a list of named ones ([{"name": "default", "template": ...}, {"name": "tool_use", ...}]).
std::optional<std::string> chat_template(const json& j, const std::string& path) {
  if (!j.contains("chat_template") || j.at("chat_template").is_null()) return std::nullopt;
  const json& v = j.at("chat_template");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    for (const json& named : v)
      if (named.is_object() && named.value("name", json()) == "default" && named.contains("template") &&
          named.at("template").is_string())
        return named.at("template").get<std::string>();
    throw IoError(path, "chat_template: a list of templates without one named \"default\"");
  }
  throw IoError(path,
                fmt::format("chat_template: expected a string or a list of named templates, got {}", v.type_name()));
}

}  // namespace

TokenizerConfig parse_tokenizer_config(const json& j, const std::string& path) {
  if (!j.is_object()) throw IoError(path, "(top level): expected a JSON object");
  TokenizerConfig config;
  config.path = path;
  config.bos_token = token_text(j, "bos_token", path);
  config.eos_token = token_text(j, "eos_token", path);
  config.pad_token = token_text(j, "pad_token", path);
  config.chat_template = chat_template(j, path);
  if (j.contains("add_bos_token") && !j.at("add_bos_token").is_null()) {
    if (!j.at("add_bos_token").is_boolean())
      throw IoError(path, fmt::format("add_bos_token: expected true or false, got {}", j.at("add_bos_token").dump()));
    config.add_bos_token = j.at("add_bos_token").get<bool>();
  }
  return config;
}

TokenizerConfig read_tokenizer_config(const std::string& path) {
  return parse_tokenizer_config(read_json_file(path), path);
}

}  // namespace rf::data
