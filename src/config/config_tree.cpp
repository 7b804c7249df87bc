#include "config/config_tree.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <cctype>
#include <sstream>

#include "config/suggest.h"
#include "config/yaml_checks.h"
#include "config/yaml_util.h"
#include "core/error.h"
#include "core/input_file.h"

namespace rf::config {
namespace {

// A config file is a few kilobytes; this is far above any real one and keeps a wrong path (a dataset,
// a device) from being parsed into a tree that takes gigabytes.
constexpr uint64_t kMaxConfigFileBytes = uint64_t(1) << 20;
// How much of an override value an error message repeats.
constexpr size_t kMaxShownValueChars = 80;

enum class OverrideKind : uint8_t { replace, add, add_or_replace };

struct Assignment {
  OverrideKind kind = OverrideKind::replace;
  std::string key;  // dotted, without the leading '+'/'++'
  std::vector<std::string> segments;
  std::string value_text;
};

std::string join_segments(const std::vector<std::string>& segments, size_t count) {
  std::string joined;
  for (size_t i = 0; i < count; ++i) joined += (i ? "." : "") + segments[i];
  return joined;
}

bool is_valid_segment(const std::string& segment) {
  if (segment.empty() || segment[0] == '+') return false;
  for (const char c : segment) {
    if (std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Assignment parse_assignment(const std::string& text) {
  const size_t equals = text.find('=');
  std::string_view key = std::string_view(text).substr(0, equals);
  Assignment assignment;
  if (key.starts_with("++")) {
    assignment.kind = OverrideKind::add_or_replace;
    key.remove_prefix(2);
  } else if (key.starts_with("+")) {
    assignment.kind = OverrideKind::add;
    key.remove_prefix(1);
  }
  assignment.key = key;
  assignment.segments = split_dotted_key(key);
  bool valid = equals != std::string::npos;
  for (const std::string& segment : assignment.segments) valid = valid && is_valid_segment(segment);
  if (!valid)
    throw ConfigError(text, "malformed override: expected key.path=value, +key.path=value (add) or "
                            "++key.path=value (add or replace)");
  assignment.value_text = text.substr(equals + 1);
  return assignment;
}

// Ignores every event: parsing with it only counts documents.
class NoEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// 0, 1, or 2 for "two or more". yaml-cpp 0.7 reads some text as an endless stream of empty documents
// (a leading ',': LoadAll never returns, and Load returns null), so the count stops at the second.
// YAML::Exception for a syntax error.
int count_documents(const std::string& yaml) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  NoEvents events;
  int count = 0;
  while (count < 2 && parser.HandleNextDocument(events)) ++count;
  return count;
}

std::string shown_value(const std::string& value_text) {
  if (value_text.size() <= kMaxShownValueChars) return value_text;
  return fmt::format("{}... ({} characters)", value_text.substr(0, kMaxShownValueChars), value_text.size());
}

YAML::Node parse_value(const Assignment& assignment) {
  // Hydra reads `key=` as the empty string; YAML would read it as null.
  if (assignment.value_text.empty()) return YAML::Node(std::string());
  YAML::Node value;
  try {
    if (count_documents(assignment.value_text) > 1)
      throw ConfigError(assignment.key, fmt::format("cannot parse the override value '{}': it is not one YAML value",
                                                    shown_value(assignment.value_text)));
    value.reset(YAML::Load(assignment.value_text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(assignment.key, fmt::format("cannot parse the override value '{}': {}",
                                                  shown_value(assignment.value_text), e.msg));
  }
  // `key=a: b` or `key=- x` would parse as block collections, which is never what a command line
  // means; a string with ': ' in it has to be quoted.
  if ((value.IsMap() || value.IsSequence()) && value.Style() != YAML::EmitterStyle::Flow)
    throw ConfigError(assignment.key, fmt::format("override value '{}' is a block YAML collection: write it "
                                                  "in flow style ([a, b] or {{k: v}}) or quote it",
                                                  shown_value(assignment.value_text)));
  if (const auto problem = find_yaml_problem(value, YamlPositions::columns)) {
    const std::string& inside = problem->key_path;  // "", "a.b" or "[1].a"
    const std::string key = inside.empty() || inside[0] == '[' ? assignment.key + inside : assignment.key + "." + inside;
    throw ConfigError(key, fmt::format("in the override value: {}", problem->what));
  }
  return value;
}

[[noreturn]] void throw_missing(const Assignment& assignment, const YAML::Node& parent, size_t missing_index) {
  const std::vector<std::string> known = map_keys(parent);
  const auto suggestion = suggest_nearest(assignment.segments[missing_index], known);
  if (suggestion) {
    std::vector<std::string> suggested = assignment.segments;
    suggested[missing_index] = *suggestion;
    throw ConfigError(assignment.key,
                      fmt::format("no such key to override; did you mean '{}'? (a leading '+' adds a new key)",
                                  join_segments(suggested, suggested.size())));
  }
  const std::string parent_path = join_segments(assignment.segments, missing_index);
  throw ConfigError(assignment.key,
                    fmt::format("no such key to override ({} has keys: {}); a leading '+' adds a new key",
                                parent_path.empty() ? "the top level" : "'" + parent_path + "'",
                                known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
}

}  // namespace

ConfigTree ConfigTree::from_file(const std::string& path) {
  return from_string(core::read_input_file(path, kMaxConfigFileBytes, "a YAML config"), path);
}

ConfigTree ConfigTree::from_string(const std::string& yaml, const std::string& source_name) {
  YAML::Node document;
  try {
    if (count_documents(yaml) > 1)
      throw IoError(source_name, "holds more than one YAML document (or text such as a leading ',' that yaml-cpp "
                                 "reads as endless empty documents); a config is one map");
    document.reset(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw IoError(source_name, e.msg);
    throw IoError(source_name, fmt::format("line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (document.IsNull()) return ConfigTree(YAML::Node(YAML::NodeType::Map));
  if (!document.IsMap())
    throw IoError(source_name, fmt::format("the top level must be a map, got {}", describe_node(document)));
  if (const auto problem = find_yaml_problem(document, YamlPositions::lines))
    throw IoError(source_name,
                  fmt::format("{}: {}", problem->key_path.empty() ? "(top level)" : problem->key_path, problem->what));
  return ConfigTree(document);
}

ConfigTree::ConfigTree(const ConfigTree& other) : root_(YAML::Clone(other.root_)) {}

ConfigTree& ConfigTree::operator=(const ConfigTree& other) {
  // reset() rebinds the handle; operator= would overwrite the nodes root_ points to.
  if (this != &other) root_.reset(YAML::Clone(other.root_));
  return *this;
}

void ConfigTree::apply_override(const std::string& text) {
  const Assignment assignment = parse_assignment(text);
  const YAML::Node value = parse_value(assignment);
  const size_t num_segments = assignment.segments.size();
  YAML::Node parent = root_;
  for (size_t i = 0; i + 1 < num_segments; ++i) {
    const std::string& segment = assignment.segments[i];
    YAML::Node child = find_child(parent, segment);
    if (child.IsMap()) {
      parent.reset(child);
      continue;
    }
    if (assignment.kind == OverrideKind::replace && !child.IsDefined()) throw_missing(assignment, parent, i);
    if (assignment.kind == OverrideKind::replace || (child.IsDefined() && !child.IsNull())) {
      throw ConfigError(assignment.key, fmt::format("cannot set it: '{}' holds {}, not a map{}",
                                                    join_segments(assignment.segments, i + 1), describe_node(child),
                                                    child.IsNull() ? " (a leading '+' creates it)" : ""));
    }
    // Adding under an absent or null key: it becomes a map.
    const YAML::Node created(YAML::NodeType::Map);
    parent[segment] = created;
    parent.reset(created);
  }
  const std::string& last = assignment.segments.back();
  const bool exists = find_child(parent, last).IsDefined();
  if (assignment.kind == OverrideKind::replace && !exists) throw_missing(assignment, parent, num_segments - 1);
  if (assignment.kind == OverrideKind::add && exists)
    throw ConfigError(assignment.key, "already exists: drop the leading '+' to replace it (or use '++')");
  parent[last] = value;
}

void ConfigTree::apply_overrides(const std::vector<std::string>& assignments) {
  for (const std::string& assignment : assignments) apply_override(assignment);
}

YAML::Node ConfigTree::node(const std::string& dotted_path) const { return node_at_path(root_, dotted_path); }

std::string ConfigTree::to_yaml() const {
  YAML::Emitter emitter;
  emitter.SetNullFormat(YAML::LowerNull);
  emitter << root_;
  return std::string(emitter.c_str()) + "\n";
}

namespace {

void merge_missing(YAML::Node target, const YAML::Node& defaults) {
  for (const auto& item : defaults) {
    const std::string key = item.first.as<std::string>();
    YAML::Node existing = find_child(target, key);
    if (!existing.IsDefined()) {
      target[key] = YAML::Clone(item.second);
    } else if (existing.IsMap() && item.second.IsMap()) {
      merge_missing(existing, item.second);
    }
  }
}

}  // namespace

void ConfigTree::merge_defaults(const YAML::Node& defaults) {
  if (defaults.IsMap()) merge_missing(root_, defaults);
}

}  // namespace rf::config
