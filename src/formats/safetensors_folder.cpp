#include "formats/safetensors_folder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/input_file.h"
#include "formats/json_input.h"

namespace rf::formats {
namespace {

namespace fs = std::filesystem;

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// A weight_map value must name a file directly inside the folder: anything with a separator, or
// "." / "..", could reach files the folder does not own.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// The index: its weight_map (tensor name -> shard file name) and the rest of it.
SafetensorsSplit read_index(const std::string& index_path) {
  // A real index lists a few thousand tensors: a few hundred kilobytes.
  constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20;
  nlohmann::json index =
      parse_json_input(core::read_input_file(index_path, kMaxIndexBytes, "a safetensors index"), index_path);
  if (!index.is_object()) throw IoError(index_path, "not a JSON object");
  const auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object())
    throw IoError(index_path, "missing the weight_map object");
  SafetensorsSplit split;
  for (const auto& [name, file] : weight_map->items()) {
    if (!file.is_string())
      throw IoError(index_path, fmt::format("weight_map['{}'] is a JSON {}, not a file name", name, file.type_name()));
    const std::string& file_name = file.get_ref<const std::string&>();
    if (!is_plain_file_name(file_name))
      throw IoError(index_path, fmt::format("weight_map['{}'] = '{}' is not a file name inside the folder", name,
                                            file_name));
    split.file_of.emplace(name, file_name);
  }
  index.erase("weight_map");
  split.index = std::move(index);
  return split;
}

}  // namespace

SafetensorsFolder::SafetensorsFolder(const std::string& dir) : dir_(dir) {
  if (!fs::is_directory(dir_)) throw IoError(dir_, "not a folder");
  const std::string single = join(dir_, kSafetensorsFileName);
  const std::string index = join(dir_, kSafetensorsIndexName);
  if (fs::exists(single)) {
    const SafetensorsReader& file = files_.try_emplace(kSafetensorsFileName, single).first->second;
    for (const std::string& name : file.names()) {
      owner_.emplace(name, &file);
      split_.file_of.emplace(name, kSafetensorsFileName);
    }
  } else if (fs::exists(index)) {
    open_sharded(index);
  } else {
    throw IoError(dir_, fmt::format("no {} or {} in the model folder", kSafetensorsFileName, kSafetensorsIndexName));
  }
}

void SafetensorsFolder::open_sharded(const std::string& index_path) {
  split_ = read_index(index_path);
  const std::map<std::string, std::string>& weight_map = split_.file_of;
  std::map<std::string, std::vector<std::string>> tensors_of;  // shard file name -> its tensors, per the index
  for (const auto& [name, file_name] : weight_map) tensors_of[file_name].push_back(name);

  for (const auto& [file_name, tensors] : tensors_of) {
    const std::string path = join(dir_, file_name);
    if (!fs::exists(path))
      throw IoError(path, fmt::format("missing: {} places {} tensors in it (e.g. '{}')", kSafetensorsIndexName,
                                      tensors.size(), tensors.front()));
    const SafetensorsReader& file = files_.try_emplace(file_name, path).first->second;
    for (const std::string& name : tensors) {
      if (!file.contains(name))
        throw IoError(path, fmt::format("has no tensor '{}', which {} places in it", name, kSafetensorsIndexName));
      owner_.emplace(name, &file);
    }
  }
  // A shard may hold nothing the index does not place there: a tensor in two shards would otherwise
  // load from whichever the index happens to name, and one the index omits would be silently lost.
  for (const auto& [file_name, file] : files_) {
    for (const std::string& name : file.names()) {
      const auto placed = weight_map.find(name);
      if (placed == weight_map.end())
        throw IoError(file.path(),
                      fmt::format("holds tensor '{}', which {} does not list", name, kSafetensorsIndexName));
      if (placed->second != file_name)
        throw IoError(file.path(), fmt::format("holds tensor '{}', which is also in {}, where {} places it", name,
                                               placed->second, kSafetensorsIndexName));
    }
  }
}

std::vector<std::string> SafetensorsFolder::files() const {
  std::vector<std::string> out;
  for (const auto& [file_name, file] : files_) out.push_back(file.path());
  return out;
}

std::vector<std::string> SafetensorsFolder::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : owner_) out.push_back(name);
  return out;
}

const SafetensorsReader& SafetensorsFolder::file_of(const std::string& name) const {
  const auto it = owner_.find(name);
  if (it == owner_.end()) throw IoError(dir_, fmt::format("no tensor named '{}'", name));
  return *it->second;
}

}  // namespace rf::formats
