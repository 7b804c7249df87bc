// Checks on a loaded YAML document for what yaml-cpp accepts silently but a config must not hold:
//   - a key given twice in one map: yaml-cpp keeps both entries and every lookup finds the first, so
//     the second (usually the edit the user just made) would be ignored;
//   - a key that is not a plain scalar (`? [a, b]`, `~`): config keys are names;
//   - aliases that expand past kMaxYamlValues values or kMaxYamlDepth levels: yaml-cpp shares an
//     aliased node, but everything that walks the tree (the binder, yaml_to_json, merge_defaults)
//     expands it, so ten lines of nested aliases (an "alias bomb") would take all memory, and an
//     anchor used inside itself (`a: &x [*x]`) would recurse forever.
// The walk stops at the first problem and visits at most kMaxYamlValues nodes, so it is cheap on any
// input. Not here: anything about what the keys mean (the binder, bind.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <string>

namespace rf::config {

// Far above any real config (a few hundred values), far below what would strain memory.
inline constexpr size_t kMaxYamlValues = 100'000;
// yaml-cpp refuses deeper nesting in the text itself; deeper only comes from an alias inside its anchor.
inline constexpr size_t kMaxYamlDepth = 200;

// How a problem's positions are written: "line 3" in a file, "column 12" in a one-line override value.
enum class YamlPositions : uint8_t { lines, columns };

struct YamlProblem {
  std::string key_path;  // dotted, relative to the checked node ("" for the node itself)
  std::string what;      // "given twice in one map, on line 3 and on line 7 (...)"
};

std::optional<YamlProblem> find_yaml_problem(const YAML::Node& root, YamlPositions positions);

}  // namespace rf::config
