#include "config/yaml_checks.h"

#include <fmt/format.h>

#include <map>

#include "config/yaml_util.h"

namespace rf::config {
namespace {

class DocumentWalker {
 public:
  explicit DocumentWalker(YamlPositions positions) : positions_(positions) {}

  std::optional<YamlProblem> walk(const YAML::Node& node, const std::string& path, size_t depth) {
    if (++num_values_ > kMaxYamlValues)
      return YamlProblem{path, fmt::format("the document holds more than {} values, counting each alias as a copy "
                                           "of what it names (nested aliases that multiply, an \"alias bomb\"?)",
                                           kMaxYamlValues)};
    if (depth > kMaxYamlDepth)
      return YamlProblem{path, fmt::format("nests deeper than {} levels (an alias used inside its own anchor?)",
                                           kMaxYamlDepth)};
    if (node.IsSequence()) {
      size_t index = 0;
      for (const YAML::Node& item : node) {
        if (auto problem = walk(item, fmt::format("{}[{}]", path, index++), depth + 1)) return problem;
      }
    } else if (node.IsMap()) {
      std::map<std::string, YAML::Mark> first_mark_of_key;
      for (const auto& entry : node) {
        const YAML::Node& key = entry.first;
        if (!key.IsScalar())
          return YamlProblem{path, fmt::format("{}: a key must be a plain name, got {}", position(key.Mark()),
                                               describe_node(key))};
        const std::string key_path = path.empty() ? key.Scalar() : path + "." + key.Scalar();
        const auto [first, fresh] = first_mark_of_key.emplace(key.Scalar(), key.Mark());
        if (!fresh)
          return YamlProblem{key_path, fmt::format("given twice in one map, {} and {} (delete one: YAML readers "
                                                   "disagree on which counts, yaml-cpp keeps the first)",
                                                   position(first->second), position(key.Mark()))};
        if (auto problem = walk(entry.second, key_path, depth + 1)) return problem;
      }
    }
    return std::nullopt;
  }

 private:
  std::string position(const YAML::Mark& mark) const {
    if (mark.is_null()) return "at an unknown position";
    return positions_ == YamlPositions::lines ? fmt::format("on line {}", mark.line + 1)
                                              : fmt::format("at column {}", mark.column + 1);
  }

  YamlPositions positions_;
  size_t num_values_ = 0;
};

}  // namespace

std::optional<YamlProblem> find_yaml_problem(const YAML::Node& root, YamlPositions positions) {
  return DocumentWalker(positions).walk(root, "", 0);
}

}  // namespace rf::config
