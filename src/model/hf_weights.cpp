#include "model/hf_weights.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/log.h"
#include "formats/safetensors_reader.h"

namespace rf::model {
namespace {

std::vector<std::string> weight_files(const std::filesystem::path& dir) {
  const auto single = dir / "model.safetensors";
  if (std::filesystem::exists(single)) return {single.string()};
  const auto index_path = dir / "model.safetensors.index.json";
  if (!std::filesystem::exists(index_path))
    throw IoError(dir.string(), "no model.safetensors or model.safetensors.index.json in the model folder");
  std::ifstream in(index_path);
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(index_path.string(), fmt::format("not valid JSON: {}", e.what()));
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw IoError(index_path.string(), "missing the weight_map object");
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert((dir / file.get<std::string>()).string());
  return {files.begin(), files.end()};
}

bool ignorable(const std::string& name, const ParamLayout& layout) {
  if (name.ends_with("rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && !layout.contains("lm_head.weight");  // tied: the embedding is used
}

}  // namespace

void load_hf_weights(const ParamStore& params, const std::string& model_dir) {
  const ParamLayout& layout = params.layout();
  std::set<std::string> loaded;
  for (const std::string& file : weight_files(model_dir)) {
    const formats::SafetensorsReader reader(file);
    for (const std::string& name : reader.names()) {
      if (!layout.contains(name)) {
        if (ignorable(name, layout)) {
          core::log_debug("{}: ignoring {}", file, name);
          continue;
        }
        throw IoError(file, fmt::format("tensor '{}' is not a parameter of this model config", name));
      }
      const ParamEntry& e = layout.entry(name);
      const auto& stored = reader.entry(name);
      if (!(stored.shape == e.shape))
        throw IoError(file, fmt::format("tensor '{}' has shape {}, the config implies {}", name,
                                        stored.shape.to_string(), e.shape.to_string()));
      copy_convert(reader.view(name), params.get(name));
      loaded.insert(name);
    }
  }
  for (const ParamEntry& e : layout.entries())
    if (!loaded.count(e.name)) throw IoError(model_dir, fmt::format("weights are missing tensor '{}'", e.name));
}

}  // namespace rf::model
