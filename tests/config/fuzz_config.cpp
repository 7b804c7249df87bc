// libFuzzer target for the config input path: a YAML document and dotted overrides, through
// ConfigTree (yaml_checks, merge_defaults, apply_override) and the binder over real config structs of
// src/ (optim::OptimConfig, engine::EngineConfig, data::DataConfig: between them every field type the
// binder reads, a free-form YAML::Node included). The input is the document, then '\0'-separated
// override assignments. A bad input may only raise ConfigError or IoError; any other exception escapes
// and libFuzzer reports it. A config that binds must survive to_yaml -> text -> bind unchanged, and its
// free-form task_kwargs must convert to JSON.
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus_config/.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config/bind.h"
#include "config/config_tree.h"
#include "config/yaml_json.h"
#include "core/error.h"
#include "data/data_config.h"
#include "engine/engine_config.h"
#include "optim/optim_config.h"

namespace {

struct FuzzRunConfig {
  rf::optim::OptimConfig optim;
  rf::engine::EngineConfig megatron;
  rf::data::DataConfig data;
  template <class Fields>
  void fields(Fields& f) {
    f("optim", optim, "");
    f("megatron", megatron, "");
    f("data", data, "");
  }
};

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_config: broken promise: %s\n", what);
  std::abort();
}

std::string dump(const FuzzRunConfig& config) { return YAML::Dump(rf::config::to_yaml(config)); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t end = input.find('\0', start);
    parts.emplace_back(input.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  FuzzRunConfig config;
  try {
    rf::config::ConfigTree tree = rf::config::ConfigTree::from_string(parts[0], "fuzz.yaml");
    tree.merge_defaults(rf::config::to_yaml(FuzzRunConfig{}));
    tree.apply_overrides(std::vector<std::string>(parts.begin() + 1, parts.end()));
    config = rf::config::bind<FuzzRunConfig>(tree.root(), "");
  } catch (const rf::ConfigError&) {
    return 0;  // refused with a message naming the key: what a bad config should get
  } catch (const rf::IoError&) {
    return 0;  // refused naming the file (a YAML syntax error, a duplicate key, an alias bomb)
  }
  // What the run writes as its resolved config.yaml reads back as the same config.
  const std::string text = dump(config);
  const rf::config::ConfigTree reread = rf::config::ConfigTree::from_string(text, "resolved.yaml");
  expect(dump(rf::config::bind<FuzzRunConfig>(reread.root(), "")) == text, "the resolved config reads back unchanged");
  rf::config::yaml_to_json(config.data.task_kwargs);
  return 0;
}
