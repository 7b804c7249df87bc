// Small yaml-cpp helpers shared by the override engine and the binder. They exist because
// yaml-cpp's own lookups have traps: `node[key]` on a non-const node inserts the key, on a const node
// it returns an "invalid" node whose IsNull() throws, and on a scalar it throws. `find_child` never
// inserts and always returns a valid node (undefined when the key is absent).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

namespace rf::config {

// The value under `key` in `map` (a handle into the same tree), or an undefined node when `map` is
// not a map or has no such key.
YAML::Node find_child(const YAML::Node& map, std::string_view key);
// "a.b.c" -> {"a", "b", "c"} (an empty segment stays: "a..b" has three; "" is one empty segment).
std::vector<std::string> split_dotted_key(std::string_view dotted);
// The node at a dotted path below `root` (a handle into the same tree; "" is `root`), or an undefined
// node when a segment is absent.
YAML::Node node_at_path(const YAML::Node& root, std::string_view dotted);
// Whether two values mean the same to a Python config reader (verl's OmegaConf, ROLL's dataclasses):
// 8 == 8.0 == +8, true == True, null == ~, lists element by element, maps key by key in any order.
bool same_yaml_value(const YAML::Node& a, const YAML::Node& b);
// The keys of a map, in document order (empty for anything else).
std::vector<std::string> map_keys(const YAML::Node& map);
// One line in flow style ("[0.9, 0.999]", "{x: 1}", "null").
std::string flow_yaml(const YAML::Node& node);
// How an error message shows a value it did not expect: "null", "'abc'", "the list [1, 2]",
// "the map {x: 1}" (long values are cut).
std::string describe_node(const YAML::Node& node);

}  // namespace rf::config
