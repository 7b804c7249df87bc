#include "model/hf_folder.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/finite_values.h"
#include "core/input_file.h"
#include "formats/atomic_file.h"
#include "formats/json_input.h"
#include "formats/safetensors_folder.h"
#include "formats/safetensors_folder_writer.h"
#include "model/param_layout.h"
#include "model/weights_dimensions.h"

namespace rf::model {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw IoError(path, "read failed");
  return contents.str();
}

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::f64: return "float64";
    default: break;
  }
  RF_CHECK(false, "{} is not a floating dtype for model weights", dtype_name(dtype));
  return {};
}

std::optional<DType> dtype_from_torch_name(const std::string& name) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    if (torch_dtype_name(dtype) == name) return dtype;
  return std::nullopt;
}

std::string hf_config_text(const nlohmann::json& config_json) {
  // nlohmann::json keeps object keys sorted and formats numbers as Python's repr does (shortest
  // round-trip), so with Python's ensure_ascii this is json.dumps(indent=2, sort_keys=True).
  return config_json.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

HfModelFolder HfModelFolder::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError(dir, "not a folder (expected a Hugging Face model folder)");
  HfModelFolder folder;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec)) throw IoError(config_path, "missing: a model folder needs config.json");
  folder.config_json = formats::parse_json_input(
      core::read_input_file(config_path, ModelConfig::kMaxConfigJsonBytes, "a model's config.json"), config_path);
  folder.config = ModelConfig::from_json(folder.config_json, config_path);

  const formats::SafetensorsFolder weights(dir);
  check_dimensions_against_weights(folder.config, weights);  // they bound the layout built next
  const ParamLayout layout = ParamLayout::for_model(folder.config);
  for (const ParamEntry& e : layout.entries()) {
    if (!weights.contains(e.name)) throw IoError(dir, fmt::format("weights are missing tensor '{}'", e.name));
    const DType dtype = weights.entry(e.name).dtype;
    if (!is_floating(dtype))
      throw IoError(weights.file_of(e.name).path(),
                    fmt::format("tensor '{}' is {}: model weights must be floating point", e.name, dtype_name(dtype)));
    folder.weight_dtypes[e.name] = dtype;
  }
  // Shards of one save carry the same __metadata__; the first file's stands for all.
  if (const std::vector<std::string> names = weights.names(); !names.empty())
    folder.weight_metadata = weights.file_of(names.front()).metadata();
  folder.weight_split = weights.split();

  for (const char* name : kHfSideFiles) {
    const std::string path = (fs::path(dir) / name).string();
    if (!fs::exists(path, ec)) continue;
    std::string contents = read_file_bytes(path);
    // Small JSON files are checked here so that a broken one is named now, not when a later tool
    // reads the copy; tokenizer.json (megabytes) is the tokenizer's to check.
    if (std::string_view(name).ends_with(".json") && std::string_view(name) != "tokenizer.json")
      formats::parse_json_input(contents, path);
    folder.side_files.emplace(name, std::move(contents));
  }
  return folder;
}

HfModelFolder HfModelFolder::for_config(const ModelConfig& config, DType dtype) {
  HfModelFolder folder;
  folder.config = config;
  folder.config.torch_dtype = torch_dtype_name(dtype);
  folder.config_json = folder.config.to_json();
  const ParamLayout layout = ParamLayout::for_model(config);
  for (const ParamEntry& e : layout.entries()) folder.weight_dtypes[e.name] = dtype;
  folder.weight_metadata = {{"format", "pt"}};  // what transformers writes: safetensors' torch loader expects it
  return folder;
}

DType HfModelFolder::exact_store_dtype() const {
  for (const auto& [name, dtype] : weight_dtypes)
    if (dtype == DType::f64) return DType::f64;
  return DType::f32;
}

void HfModelFolder::set_dtype(DType dtype) {
  const ParamLayout layout = ParamLayout::for_model(config);
  for (const ParamEntry& e : layout.entries()) {
    const auto it = weight_dtypes.find(e.name);
    if (it == weight_dtypes.end() || it->second != dtype) weight_split.reset();
    weight_dtypes[e.name] = dtype;
  }
  config.torch_dtype = torch_dtype_name(dtype);
  bool set = false;
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!config_json.contains(key)) continue;
    config_json[key] = config.torch_dtype;
    set = true;
  }
  if (!set) config_json["torch_dtype"] = config.torch_dtype;
}

void HfModelFolder::set_head(HeadKind head, int64_t num_labels) {
  const ParamLayout old_layout = ParamLayout::for_model(config);
  const DType dtype = weight_dtypes.at("model.norm.weight");
  config.head = head;
  config.num_labels = num_labels;
  config.validate();
  set_head_json(config_json, config.arch, head, num_labels);
  std::map<std::string, DType> dtypes;
  const ParamLayout layout = ParamLayout::for_model(config);
  for (const ParamEntry& e : layout.entries()) {
    const auto it = weight_dtypes.find(e.name);
    dtypes[e.name] = old_layout.contains(e.name) && it != weight_dtypes.end() ? it->second : dtype;
  }
  weight_dtypes = std::move(dtypes);
  weight_split.reset();
}

std::vector<std::string> write_hf_folder(const std::string& dir, const HfModelFolder& source, const ParamStore& params,
                                         const HfExportOptions& options) {
  const ParamLayout expected = ParamLayout::for_model(source.config);
  const ParamLayout& layout = params.layout();
  RF_CHECK(layout.entries().size() == expected.entries().size(),
           "the weights do not match the config: {} tensors, where {} implies {}", layout.entries().size(),
           source.config.describe(), expected.entries().size());
  for (const ParamEntry& e : expected.entries())
    RF_CHECK(layout.contains(e.name) && layout.entry(e.name).shape == e.shape,
             "the weights do not match the config: tensor '{}' should be {}", e.name, e.shape.to_string());
  for (const ParamEntry& e : layout.entries())
    if (!all_finite(params.get(e.name)))
      throw IoError(dir, fmt::format("refused: weight '{}' holds NaN or Inf values, and no export of non-finite "
                                     "weights is written",
                                     e.name));
  if (options.dtype)
    RF_CHECK(options.dtype == DType::f32 || options.dtype == DType::bf16 || options.dtype == DType::f16 ||
                 options.dtype == DType::f64,
             "export dtype {}: expected f32, bf16, f16 or f64", dtype_name(*options.dtype));
  HfModelFolder folder = source;
  if (options.dtype) folder.set_dtype(*options.dtype);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw IoError(dir, "cannot create the model folder");

  // Tensors already in the export dtype are written from the store's memory; the rest are converted
  // copies (one at a time would be leaner, but the writer takes the whole set to plan the shards).
  std::vector<Tensor> converted;
  converted.reserve(layout.entries().size());
  std::vector<std::pair<std::string, TensorView>> tensors;
  bool split_holds = folder.weight_split && folder.weight_split->file_of.size() == layout.entries().size();
  for (const ParamEntry& e : layout.entries()) {
    const auto it = folder.weight_dtypes.find(e.name);
    RF_CHECK(it != folder.weight_dtypes.end(), "no stored dtype for tensor '{}' (give an export dtype)", e.name);
    const DType dtype = it->second;
    split_holds = split_holds && folder.weight_split->file_of.count(e.name);
    const TensorView view = params.get(e.name);
    if (dtype == view.dtype()) {
      tensors.emplace_back(e.name, view);
    } else {
      converted.push_back(clone(view, dtype));
      tensors.emplace_back(e.name, converted.back().view());
    }
  }
  std::vector<std::string> written =
      options.max_shard_bytes || !split_holds
          ? formats::write_safetensors_folder(dir, tensors, options.max_shard_bytes.value_or(kDefaultMaxShardBytes),
                                              folder.weight_metadata)
          : formats::write_safetensors_folder(dir, tensors, *folder.weight_split, folder.weight_metadata);

  for (const auto& [name, contents] : folder.side_files) {
    formats::write_file_atomically((fs::path(dir) / name).string(), contents);
    written.push_back(name);
  }
  formats::write_file_atomically((fs::path(dir) / "config.json").string(), hf_config_text(folder.config_json));
  written.push_back("config.json");
  return written;
}

std::vector<int64_t> generation_eos_ids(const HfModelFolder& folder, const std::string& dir) {
  const auto ids_of = [&](const nlohmann::json& j, const char* file) -> std::optional<std::vector<int64_t>> {
    if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return std::nullopt;
    const nlohmann::json& v = j["eos_token_id"];
    std::vector<int64_t> ids;
    for (const nlohmann::json& id : v.is_array() ? v : nlohmann::json::array({v})) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        throw IoError((fs::path(dir) / file).string(), fmt::format("eos_token_id: {} is not a token id", v.dump()));
      ids.push_back(id.get<int64_t>());
    }
    return ids;
  };
  if (const auto it = folder.side_files.find("generation_config.json"); it != folder.side_files.end()) {
    const std::string path = (fs::path(dir) / it->first).string();
    if (auto ids = ids_of(formats::parse_json_input(it->second, path), "generation_config.json")) return *ids;
  }
  return ids_of(folder.config_json, "config.json").value_or(std::vector<int64_t>{});
}

}  // namespace rf::model
