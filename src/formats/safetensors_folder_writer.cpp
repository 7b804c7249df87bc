#include "formats/safetensors_folder_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "formats/atomic_file.h"
#include "formats/safetensors_folder.h"
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
  // Checked across the whole set first: a name repeated in two shards would pass each file's check.
  std::set<std::string> seen;
  std::vector<size_t> tensor_bytes;
  for (const auto& [name, view] : tensors) {
    RF_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", dir, name);
    RF_CHECK(seen.insert(name).second, "{}: tensor '{}' given twice", dir, name);
    RF_CHECK(!view.empty(), "{}: tensor '{}' is an empty view", dir, name);
    tensor_bytes.push_back(view.nbytes());
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(dir, fmt::format("cannot create the folder: {}", ec.message()));

  const std::vector<std::vector<size_t>> plan = plan_safetensors_shards(tensor_bytes, max_shard_bytes);
  std::vector<std::string> written;
  if (plan.size() == 1) {
    write_safetensors((fs::path(dir) / kSafetensorsFileName).string(), tensors, metadata);
    written.push_back(kSafetensorsFileName);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    size_t total_bytes = 0;
    for (size_t s = 0; s < plan.size(); ++s) {
      const std::string file_name = safetensors_shard_name(s, plan.size());
      std::vector<std::pair<std::string, TensorView>> shard;
      for (size_t i : plan[s]) {
        shard.push_back(tensors[i]);
        weight_map[tensors[i].first] = file_name;
        total_bytes += tensor_bytes[i];
      }
      write_safetensors((fs::path(dir) / file_name).string(), shard, metadata);
      written.push_back(file_name);
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    write_file_atomically((fs::path(dir) / kSafetensorsIndexName).string(), index.dump(2) + "\n");
    written.push_back(kSafetensorsIndexName);
  }
  remove_stale_files(dir, written);
  return written;
}

}  // namespace rf::formats
