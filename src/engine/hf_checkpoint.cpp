#include "engine/hf_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "engine/non_finite_check.h"
#include "model/hf_weights.h"
#include "engine/whole_weights.h"

namespace rf::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWeightsComponent = "actor";  // where TrainEngine::save_checkpoint puts the weights
constexpr const char* kHfComponent = "huggingface";
constexpr const char* kHfFolderDoc = "hf_folder";

nlohmann::json read_json_text(const std::string& path) {
  try {
    return nlohmann::json::parse(model::read_file_bytes(path));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path, fmt::format("not valid JSON: {}", e.what()));
  }
}

// Each weight of `params` (this rank's part of a model of folder.config) whole, in its stored dtype; converted or
// gathered copies are kept in `owned`. Collective over the TP and pipeline groups (whole_weights.h); `keep` says
// whether this rank keeps them.
std::vector<checkpoint::ShardedTensor> in_stored_dtypes(const model::HfModelFolder& folder,
                                                        const model::ParamStore& params,
                                                        const dist::ParallelContext& parallel, bool keep,
                                                        std::vector<Tensor>& owned) {
  std::vector<checkpoint::ShardedTensor> shards;
  owned.reserve(2 * model::ParamLayout::for_model(folder.config).entries().size());
  // The sink's tensor lives only during its call, unless it is the store's own (TP 1 and PP 1).
  const bool store_itself = parallel.tp().size() == 1 && parallel.pp().size() == 1;
  for_each_whole_weight(params, folder.config, parallel, [&](const std::string& name, TensorView weight) {
    if (!keep) return;
    const DType stored = folder.weight_dtypes.at(name);
    if (stored != weight.dtype() || !store_itself) {
      owned.push_back(clone(weight, stored));
      weight = owned.back().view();
    }
    shards.push_back(checkpoint::whole_tensor(name, weight));
  });
  return shards;
}

// What the weights alone do not say about the folder, in the huggingface/ component: config.json
// whole, the side files, and the document hf_folder.
void add_hf_folder_record(checkpoint::CheckpointWriter& writer, const model::HfModelFolder& folder,
                          const std::string& component = kHfComponent) {
  writer.add_file(component, "config.json", model::hf_config_text(folder.config_json));
  for (const auto& [name, contents] : folder.side_files) writer.add_file(component, name, contents);
  nlohmann::json dtypes = nlohmann::json::object();
  for (const auto& [name, dtype] : folder.weight_dtypes) dtypes[name] = model::torch_dtype_name(dtype);
  nlohmann::json record = {{"weight_dtypes", dtypes}, {"weight_metadata", folder.weight_metadata}};
  if (folder.weight_split) {
    record["weight_files"] = folder.weight_split->file_of;
    if (folder.weight_split->index) record["weight_index"] = *folder.weight_split->index;
  }
  writer.add_json(component, kHfFolderDoc, record);
}

}  // namespace

CheckpointStep locate_checkpoint_step(const std::string& path_text) {
  fs::path path = fs::absolute(path_text).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "global_step_3/"
  if (fs::exists(path / checkpoint::kManifestFileName)) {
    const std::string name = path.filename().string();
    const std::string prefix = "global_step_";
    int64_t step = -1;
    if (name.starts_with(prefix)) std::from_chars(name.data() + prefix.size(), name.data() + name.size(), step);
    if (step < 0) throw IoError(path_text, "a checkpoint step folder must be named global_step_<k>");
    return {path.parent_path().string(), step};
  }
  const std::optional<int64_t> latest = checkpoint::CheckpointReader::latest_step(path_text);
  if (!latest)
    throw IoError(path_text, fmt::format("neither a Hugging Face model folder (no config.json) nor a native checkpoint "
                                         "(no {} or {})",
                                         checkpoint::kLatestFileName, checkpoint::kManifestFileName));
  return {path_text, *latest};
}

void hf_folder_to_checkpoint(const std::string& hf_dir, const CheckpointStep& target, std::optional<DType> dtype) {
  model::HfModelFolder folder = model::HfModelFolder::open(hf_dir);
  model::ParamStore params(model::ParamLayout::for_model(folder.config), folder.exact_store_dtype());
  model::load_hf_weights(params, hf_dir);
  if (dtype) folder.set_dtype(*dtype);

  std::vector<Tensor> owned;
  const dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  refuse_non_finite(entry_parts(params.layout(), params.flat()), params.layout(), "", one_rank.role(),
                    fmt::format("converting {} to {}/global_step_{}", hf_dir, target.root, target.step));
  checkpoint::CheckpointWriter writer(target.root, target.step);
  writer.add_tensors(kWeightsComponent, "model", in_stored_dtypes(folder, params, one_rank, true, owned));
  add_hf_folder_record(writer, folder);
  writer.commit();
}

void add_hf_export(checkpoint::CheckpointWriter& writer, const model::HfModelFolder& folder,
                   const model::ParamStore& params, const dist::ParallelContext& parallel,
                   const std::string& component) {
  refuse_non_finite(entry_parts(params.layout(), params.flat()), params.layout(), "", parallel.role(),
                    fmt::format("exporting {} to {}/global_step_{}", component, writer.root_dir(), writer.step()));
  if (parallel.dp_cp().rank() != 0) return;  // the other DP (and CP) replicas hold the same weights
  const bool writes = parallel.role().rank() == 0;
  std::vector<Tensor> owned;
  const auto shards = in_stored_dtypes(folder, params, parallel, writes, owned);
  if (!writes) return;
  writer.add_tensors(component, "model", shards);
  add_hf_folder_record(writer, folder, component);
}

void checkpoint_to_hf_folder(const CheckpointStep& source, const std::string& hf_dir,
                             const model::HfExportOptions& options) {
  const checkpoint::CheckpointReader reader(source.root, source.step);
  const std::vector<std::string> components = reader.components();
  const auto has = [&](const char* c) { return std::find(components.begin(), components.end(), c) != components.end(); };
  const fs::path hf_part = fs::path(reader.step_dir()) / kHfComponent;

  model::HfModelFolder folder;
  if (has(kHfComponent) && fs::exists(hf_part / "config.json")) {
    const std::string path = (hf_part / "config.json").string();
    folder.config_json = read_json_text(path);
    folder.config = model::ModelConfig::from_json(folder.config_json, path);
    for (const char* name : model::kHfSideFiles)
      if (fs::exists(hf_part / name)) folder.side_files[name] = model::read_file_bytes((hf_part / name).string());
  } else if (has(kWeightsComponent)) {
    const nlohmann::json state = reader.read_json(kWeightsComponent, "engine_state");
    const std::string path = (fs::path(reader.step_dir()) / kWeightsComponent / "engine_state.json").string();
    if (!state.contains("model_config")) throw IoError(path, "model_config: missing");
    folder.config_json = state.at("model_config");
    folder.config = model::ModelConfig::from_json(folder.config_json, path);
  } else {
    throw IoError(reader.step_dir(), fmt::format("no {} or {} component: no model weights to convert",
                                                 kWeightsComponent, kHfComponent));
  }

  // Each weight's dtype: as recorded by a folder -> step conversion, else torch_dtype, else f32.
  const model::ParamLayout layout = model::ParamLayout::for_model(folder.config);
  DType fallback = DType::f32;
  if (const auto it = folder.config_json.find("torch_dtype"); it != folder.config_json.end() && it->is_string())
    fallback = model::dtype_from_torch_name(it->get<std::string>()).value_or(DType::f32);
  for (const model::ParamEntry& e : layout.entries()) folder.weight_dtypes[e.name] = fallback;
  folder.weight_metadata = {{"format", "pt"}};
  const std::string doc_path = (hf_part / (std::string(kHfFolderDoc) + ".json")).string();
  if (has(kHfComponent) && fs::exists(doc_path)) {
    const nlohmann::json recorded = reader.read_json(kHfComponent, kHfFolderDoc);
    try {
      for (const auto& [name, dtype_name] : recorded.at("weight_dtypes").items()) {
        const auto dtype = model::dtype_from_torch_name(dtype_name.get<std::string>());
        if (!dtype) throw IoError(doc_path, fmt::format("weight_dtypes['{}']: unknown dtype {}", name, dtype_name.dump()));
        if (folder.weight_dtypes.count(name)) folder.weight_dtypes[name] = *dtype;
      }
      folder.weight_metadata = recorded.at("weight_metadata").get<std::map<std::string, std::string>>();
      if (recorded.contains("weight_files")) {
        folder.weight_split = formats::SafetensorsSplit{
            recorded.at("weight_files").get<std::map<std::string, std::string>>(), std::nullopt};
        if (recorded.contains("weight_index")) folder.weight_split->index = recorded.at("weight_index");
      }
    } catch (const nlohmann::json::exception& e) {
      throw IoError(doc_path, fmt::format("malformed: {}", e.what()));
    }
  }

  const char* component = has(kWeightsComponent) ? kWeightsComponent : kHfComponent;
  model::ParamStore params(layout, folder.exact_store_dtype());
  for (const model::ParamEntry& e : layout.entries()) reader.read_tensor(component, e.name, params.get(e.name));
  model::write_hf_folder(hf_dir, folder, params, options);
}

}  // namespace rf::engine
