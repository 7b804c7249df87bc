#include "checkpoint/manifest.h"

#include <charconv>

#include "core/error.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_writer.h"

namespace rf::checkpoint {
namespace {

constexpr const char* kFormat = "rlforge-checkpoint";
constexpr const char* kChecksumName = "xxh64";

nlohmann::json shape_to_json(const Shape& shape) { return std::vector<int64_t>(shape.begin(), shape.end()); }

// Parses one manifest; every helper throws IoError naming the manifest file and the bad entry.
class ManifestParser {
 public:
  explicit ManifestParser(std::string path) : path_(std::move(path)) {}

  Manifest parse(const nlohmann::json& json) const {
    require(json.is_object(), "", "is not a JSON object");
    require(string_at(json, "format", "") == kFormat, "format", fmt::format("expected \"{}\"", kFormat));
    require(integer_at(json, "version", "") == kManifestVersion, "version",
            fmt::format("expected {} (written by a different rlforge version?)", kManifestVersion));
    require(string_at(json, "checksum", "") == kChecksumName, "checksum", fmt::format("expected \"{}\"", kChecksumName));
    Manifest manifest;
    manifest.step = integer_at(json, "step", "");
    require(manifest.step >= 0, "step", "is negative");
    const nlohmann::json& components = member(json, "components", "");
    require(components.is_object(), "components", "is not an object");
    for (const auto& [name, value] : components.items()) {
      const std::string where = "components." + name;
      require(is_plain_name(name), where, "is not a plain folder name");
      require(value.is_object(), where, "is not an object");
      manifest.components.emplace(name, parse_component(value, where));
    }
    return manifest;
  }

 private:
  ComponentRecord parse_component(const nlohmann::json& json, const std::string& where) const {
    ComponentRecord component;
    for (const auto& [name, value] : object_at(json, "files", where).items()) {
      const std::string at = where + ".files." + name;
      require(is_plain_name(name), at, "is not a plain file name");
      FileRecord file;
      const int64_t num_bytes = integer_at(value, "bytes", at);
      require(num_bytes >= 0, at + ".bytes", "is negative");
      file.num_bytes = uint64_t(num_bytes);
      const std::string hex = string_at(value, "xxh64", at);
      const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), file.checksum, 16);
      require(hex.size() == 16 && ec == std::errc() && end == hex.data() + hex.size(), at + ".xxh64",
              fmt::format("'{}' is not 16 hex digits", hex));
      component.files.emplace(name, file);
    }
    for (const auto& [name, value] : object_at(json, "tensors", where).items()) {
      const std::string at = where + ".tensors." + name;
      require(!name.empty(), at, "has an empty name");
      TensorRecord tensor;
      tensor.global_shape = shape_at(value, "global_shape", at);
      const nlohmann::json& shards = member(value, "shards", at);
      require(shards.is_array(), at + ".shards", "is not an array");
      for (size_t i = 0; i < shards.size(); ++i) {
        tensor.shards.push_back(parse_shard(shards[i], component, tensor.global_shape, fmt::format("{}.shards[{}]", at, i)));
      }
      component.tensors.emplace(name, std::move(tensor));
    }
    for (const auto& [name, value] : object_at(json, "json", where).items()) {
      const std::string at = where + ".json." + name;
      require(value.is_string() && component.files.count(value.get<std::string>()), at, "names no listed file");
      component.json_files.emplace(name, value.get<std::string>());
    }
    return component;
  }

  ShardRecord parse_shard(const nlohmann::json& json, const ComponentRecord& component, const Shape& global_shape,
                          const std::string& at) const {
    ShardRecord shard;
    shard.file = string_at(json, "file", at);
    require(component.files.count(shard.file) != 0, at + ".file", fmt::format("'{}' is not listed in files", shard.file));
    shard.key = string_at(json, "key", at);
    const std::string dtype = string_at(json, "dtype", at);
    try {
      shard.dtype = formats::safetensors_dtype(dtype);
    } catch (const Error&) {
      require(false, at + ".dtype", fmt::format("unknown dtype '{}'", dtype));
    }
    shard.global_offset = shape_at(json, "global_offset", at);
    shard.shape = shape_at(json, "shape", at);
    require(shard.global_offset.rank() == global_shape.rank() && shard.shape.rank() == global_shape.rank(), at,
            fmt::format("offset {} and shape {} do not match the rank of global shape {}",
                        shard.global_offset.to_string(), shard.shape.to_string(), global_shape.to_string()));
    for (int d = 0; d < global_shape.rank(); ++d) {
      // Both are at most 2^63 - 1, so the sum is compared without overflow as an unsigned value.
      require(uint64_t(shard.global_offset[d]) + uint64_t(shard.shape[d]) <= uint64_t(global_shape[d]), at,
              fmt::format("box at offset {} of shape {} leaves global shape {}", shard.global_offset.to_string(),
                          shard.shape.to_string(), global_shape.to_string()));
    }
    return shard;
  }

  void require(bool ok, const std::string& where, const std::string& what) const {
    if (!ok) throw IoError(path_, where.empty() ? what : fmt::format("{}: {}", where, what));
  }

  const nlohmann::json& member(const nlohmann::json& json, const char* key, const std::string& where) const {
    const std::string at = where.empty() ? key : where + "." + key;
    require(json.is_object() && json.contains(key), at, "is missing");
    return json.at(key);
  }
  const nlohmann::json& object_at(const nlohmann::json& json, const char* key, const std::string& where) const {
    const nlohmann::json& value = member(json, key, where);
    require(value.is_object(), where + "." + key, "is not an object");
    return value;
  }
  std::string string_at(const nlohmann::json& json, const char* key, const std::string& where) const {
    const nlohmann::json& value = member(json, key, where);
    require(value.is_string(), where.empty() ? key : where + "." + key, "is not a string");
    return value.get<std::string>();
  }
  int64_t integer_at(const nlohmann::json& json, const char* key, const std::string& where) const {
    const nlohmann::json& value = member(json, key, where);
    require(value.is_number_integer(), where.empty() ? key : where + "." + key, "is not an integer");
    return value.get<int64_t>();
  }
  Shape shape_at(const nlohmann::json& json, const char* key, const std::string& where) const {
    const nlohmann::json& value = member(json, key, where);
    const std::string at = where + "." + key;
    require(value.is_array() && value.size() <= size_t(kMaxDims), at,
            fmt::format("is not an array of at most {} extents", kMaxDims));
    Shape shape;
    for (const auto& extent : value) {
      require(extent.is_number_integer() && extent.get<int64_t>() >= 0, at, "holds a value that is not an extent");
      shape.push_back(extent.get<int64_t>());
    }
    return shape;
  }

  std::string path_;
};

}  // namespace

std::string step_folder_name(int64_t step) { return fmt::format("global_step_{}", step); }

bool is_plain_name(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

nlohmann::json manifest_to_json(const Manifest& manifest) {
  nlohmann::json components = nlohmann::json::object();
  for (const auto& [component_name, component] : manifest.components) {
    nlohmann::json files = nlohmann::json::object(), tensors = nlohmann::json::object();
    for (const auto& [name, file] : component.files)
      files[name] = {{"bytes", file.num_bytes}, {kChecksumName, fmt::format("{:016x}", file.checksum)}};
    for (const auto& [name, tensor] : component.tensors) {
      nlohmann::json shards = nlohmann::json::array();
      for (const ShardRecord& shard : tensor.shards) {
        shards.push_back({{"file", shard.file},
                          {"key", shard.key},
                          {"dtype", formats::safetensors_dtype_name(shard.dtype)},
                          {"global_offset", shape_to_json(shard.global_offset)},
                          {"shape", shape_to_json(shard.shape)}});
      }
      tensors[name] = {{"global_shape", shape_to_json(tensor.global_shape)}, {"shards", std::move(shards)}};
    }
    components[component_name] = {
        {"files", std::move(files)}, {"tensors", std::move(tensors)}, {"json", component.json_files}};
  }
  return {{"format", kFormat},
          {"version", kManifestVersion},
          {"step", manifest.step},
          {"checksum", kChecksumName},
          {"components", std::move(components)}};
}

Manifest manifest_from_json(const nlohmann::json& json, const std::string& path) {
  return ManifestParser(path).parse(json);
}

void merge_manifest(Manifest& whole, const Manifest& part, int rank) {
  for (const auto& [name, from] : part.components) {
    ComponentRecord& into = whole.components[name];
    for (const auto& [file, record] : from.files)
      RF_CHECK(into.files.emplace(file, record).second, "checkpoint {}/{}: written by rank {} and by another rank",
               name, file, rank);
    for (const auto& [doc, file] : from.json_files)
      RF_CHECK(into.json_files.emplace(doc, file).second,
               "checkpoint {}: JSON document '{}' written by rank {} and by another rank", name, doc, rank);
    for (const auto& [tensor_name, tensor] : from.tensors) {
      const auto [it, first] = into.tensors.emplace(tensor_name, TensorRecord{tensor.global_shape, {}});
      RF_CHECK(first || it->second.global_shape == tensor.global_shape,
               "checkpoint {}: '{}' has global shape {} on rank {} and {} on another rank", name, tensor_name,
               tensor.global_shape.to_string(), rank, it->second.global_shape.to_string());
      it->second.shards.insert(it->second.shards.end(), tensor.shards.begin(), tensor.shards.end());
    }
  }
}

}  // namespace rf::checkpoint
