// ConfigTree: a verl-style YAML config plus Hydra-style command-line overrides.
//   key.path=value     replaces an existing key (a missing one is an error with a "did you mean")
//   +key.path=value    adds a key, creating maps on the way (an existing one is an error)
//   ++key.path=value   adds or replaces
// The value is one YAML scalar or flow collection: 3, 1e-3, true, null, 'quoted', [1, 2], {x: 1};
// `key=` sets the empty string. The tree knows no schema: typed structs are filled from its
// subtrees by `bind` (bind.h).
// Not here: Hydra's defaults lists, `~key` deletion, interpolation (${...}).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace rf::config {

class ConfigTree {
 public:
  // IoError naming the file (and the line and column of a YAML syntax error). The top level must be
  // a map; an empty document is an empty map. A file larger than 1 MiB or that is not a file (a
  // device, a folder) is refused before parsing; a key given twice, a key that is not a name, and
  // aliases that expand too far are refused naming the key and its lines (yaml_checks.h).
  static ConfigTree from_file(const std::string& path);
  // `source_name` stands for the file in error messages.
  static ConfigTree from_string(const std::string& yaml, const std::string& source_name);

  // yaml-cpp nodes are shared handles, so a member-wise copy would alias the tree: copies clone it,
  // and an override on a copy never shows through in the original. (No move operations: a move
  // would be a copy-assign of a yaml-cpp handle, which rewrites the nodes it pointed to.)
  ConfigTree(const ConfigTree& other);
  ConfigTree& operator=(const ConfigTree& other);
  ~ConfigTree() = default;

  // Fills in every key of `defaults` (e.g. to_yaml of a default-constructed config struct) that the
  // document lacks, recursing into maps present in both; keys in the document win. Afterwards a
  // plain `a.b=v` override reaches every schema key, as in verl, whose YAML lists all defaults.
  void merge_defaults(const YAML::Node& defaults);

  // ConfigError naming the key path (or the whole assignment when it is malformed). The value is
  // checked as a file is (yaml_checks.h).
  void apply_override(const std::string& assignment);
  void apply_overrides(const std::vector<std::string>& assignments);

  // The subtree at `dotted_path` ("" is the root), as a handle into this tree; an absent path gives
  // an undefined node (IsDefined() false), which `bind` treats as "all defaults".
  YAML::Node node(const std::string& dotted_path) const;
  const YAML::Node& root() const { return root_; }
  std::string to_yaml() const;

 private:
  explicit ConfigTree(const YAML::Node& root) : root_(root) {}

  YAML::Node root_;
};

}  // namespace rf::config
