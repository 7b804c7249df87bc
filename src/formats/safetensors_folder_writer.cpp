#include "formats/safetensors_folder_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "formats/atomic_file.h"
#include "formats/safetensors_writer.h"

namespace rf::formats {
namespace {

namespace fs = std::filesystem;

// "model-DDDDD-of-DDDDD.safetensors", the names a sharded save of any shard count produces.
bool is_shard_name(const std::string& name) {
  const std::string pattern = "model-00000-of-00000.safetensors";
  if (name.size() != pattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool digit = name[i] >= '0' && name[i] <= '9';
    if (pattern[i] == '0' ? !digit : name[i] != pattern[i]) return false;
  }
  return true;
}

// Removes the weight files in `dir` that this save did not write, so that no stale shard or layout
// can be read as part of the new weights.
void remove_stale_files(const std::string& dir, const std::vector<std::string>& written) {
  const std::set<std::string> keep(written.begin(), written.end());
  std::vector<fs::path> stale;  // collected first: removing entries while iterating is unspecified
  for (const fs::directory_entry& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    const bool ours = name == kSafetensorsFileName || name == kSafetensorsIndexName || is_shard_name(name);
    if (ours && !keep.count(name)) stale.push_back(item.path());
  }
  for (const fs::path& file : stale) {
    std::error_code ec;
    fs::remove(file, ec);
    if (ec) throw IoError(file.string(), fmt::format("cannot remove a stale weight file: {}", ec.message()));
  }
}

}  // namespace

std::vector<std::vector<size_t>> plan_safetensors_shards(const std::vector<size_t>& tensor_bytes,
                                                         size_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> filling;
  size_t filling_bytes = 0;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    const size_t bytes = tensor_bytes[i];
    if (bytes > max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (filling_bytes + bytes > max_shard_bytes) {
      shards.push_back(std::move(filling));
      filling = {};
      filling_bytes = 0;
    }
    filling.push_back(i);
    filling_bytes += bytes;
  }
  if (!filling.empty() || shards.empty()) shards.push_back(std::move(filling));
  return shards;
}

std::string safetensors_shard_name(size_t index, size_t num_shards) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, num_shards);
}

std::vector<std::string> write_safetensors_folder(const std::string& dir,
                                                  const std::vector<std::pair<std::string, TensorView>>& tensors,
                                                  size_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> tensor_bytes;
  for (const auto& [name, view] : tensors) tensor_bytes.push_back(view.nbytes());
  const std::vector<std::vector<size_t>> plan = plan_safetensors_shards(tensor_bytes, max_shard_bytes);
  SafetensorsSplit split;
  size_t total_bytes = 0;
  for (size_t s = 0; s < plan.size(); ++s) {
    const std::string file_name = plan.size() == 1 ? kSafetensorsFileName : safetensors_shard_name(s, plan.size());
    for (size_t i : plan[s]) {
      split.file_of[tensors[i].first] = file_name;
      total_bytes += tensor_bytes[i];
    }
  }
  if (plan.size() > 1) split.index = nlohmann::json{{"metadata", {{"total_size", total_bytes}}}};
  return write_safetensors_folder(dir, tensors, split, metadata);
}

std::vector<std::string> write_safetensors_folder(const std::string& dir,
                                                  const std::vector<std::pair<std::string, TensorView>>& tensors,
                                                  const SafetensorsSplit& split,
                                                  const std::map<std::string, std::string>& metadata) {
  // Checked across the whole set first: a name repeated in two shards would pass each file's check.
  std::set<std::string> seen;
  std::map<std::string, std::vector<std::pair<std::string, TensorView>>> files;  // file name -> its tensors
  for (const auto& [name, view] : tensors) {
    RF_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", dir, name);
    RF_CHECK(seen.insert(name).second, "{}: tensor '{}' given twice", dir, name);
    RF_CHECK(!view.empty(), "{}: tensor '{}' is an empty view", dir, name);
    const auto file = split.file_of.find(name);
    RF_CHECK(file != split.file_of.end(), "{}: tensor '{}' has no file in the split", dir, name);
    RF_CHECK(file->second.find('/') == std::string::npos && file->second.ends_with(".safetensors"),
             "{}: tensor '{}': '{}' is not a .safetensors file name inside the folder", dir, name, file->second);
    RF_CHECK(split.index || file->second == kSafetensorsFileName,
             "{}: tensor '{}' is placed in '{}', but a folder without an index has only {}", dir, name, file->second,
             kSafetensorsFileName);
    files[file->second].emplace_back(name, view);
  }
  RF_CHECK(seen.size() == split.file_of.size(), "{}: the split places {} tensors, but {} are given", dir,
           split.file_of.size(), seen.size());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(dir, fmt::format("cannot create the folder: {}", ec.message()));

  if (files.empty() && !split.index) files[kSafetensorsFileName];  // no tensors: one empty file, not none
  std::vector<std::string> written;
  for (const auto& [file_name, file_tensors] : files) {
    write_safetensors((fs::path(dir) / file_name).string(), file_tensors, metadata);
    written.push_back(file_name);
  }
  if (split.index) {
    nlohmann::json index = *split.index;
    index["weight_map"] = split.file_of;
    // json.dumps(indent=2, sort_keys=True) + "\n", as transformers writes it.
    write_file_atomically((fs::path(dir) / kSafetensorsIndexName).string(), index.dump(2) + "\n");
    written.push_back(kSafetensorsIndexName);
  }
  remove_stale_files(dir, written);
  return written;
}

}  // namespace rf::formats
