#include "checkpoint/checkpoint_writer.h"

#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "checkpoint/durable_file.h"
#include "checkpoint/xxhash64.h"
#include "core/log.h"
#include "dist/text_collectives.h"
#include "formats/mapped_file.h"
#include "formats/safetensors_writer.h"

namespace rf::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string join(const std::string& folder, const std::string& name) { return (fs::path(folder) / name).string(); }

// A suffix no other live writer uses: the process id, and a clock reading for writers within one process.
std::string unique_suffix() {
  return fmt::format("{}.{}", ::getpid(), std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string join_extents(const Shape& shape) { return fmt::format("{}", fmt::join(shape.begin(), shape.end(), ",")); }

}  // namespace

ShardedTensor whole_tensor(std::string name, TensorView tensor) {
  Shape offset;
  for (int d = 0; d < tensor.rank(); ++d) offset.push_back(0);
  return ShardedTensor{std::move(name), tensor, tensor.shape(), offset};
}

CheckpointWriter::CheckpointWriter(std::string root_dir, int64_t step) : root_dir_(std::move(root_dir)), step_(step) {
  RF_CHECK(step >= 0, "checkpoint step {} is negative", step);
  manifest_.step = step;
  create_temp_folder();
}

CheckpointWriter::CheckpointWriter(std::string root_dir, int64_t step, dist::ProcessGroup& group)
    : root_dir_(std::move(root_dir)), step_(step), group_(&group) {
  RF_CHECK(step >= 0, "checkpoint step {} is negative", step);
  manifest_.step = step;
  if (group.rank() == 0) {
    try {
      create_temp_folder();
    } catch (...) {
      dist::broadcast_text(group, "", 0);  // no folder: the others must not wait for one
      throw;
    }
  }
  temp_dir_ = dist::broadcast_text(group, temp_dir_, 0);
  if (temp_dir_.empty())
    throw IoError(root_dir_, fmt::format("rank 0 could not create the temp folder of step {} (its error says why)",
                                         step));
}

void CheckpointWriter::create_temp_folder() {
  std::error_code ec;
  fs::create_directories(root_dir_, ec);
  if (ec || !fs::is_directory(root_dir_))
    throw IoError(root_dir_, fmt::format("cannot create the checkpoint folder: {}",
                                         ec ? ec.message() : "a file of that name exists"));
  for (int attempt = 0;; ++attempt) {
    const std::string candidate = join(root_dir_, fmt::format(".{}.tmp.{}", step_folder_name(step_), unique_suffix()));
    if (::mkdir(candidate.c_str(), 0777) == 0) {
      temp_dir_ = candidate;
      break;
    }
    if (errno != EEXIST || attempt == 100)
      throw IoError(root_dir_, fmt::format("cannot create the temp folder {}: {}", candidate, std::strerror(errno)));
  }
}

CheckpointWriter::~CheckpointWriter() {
  if (writer_rank() != 0 || temp_dir_.empty()) return;  // the temp folder is rank 0's
  // Before commit this is the unpublished step; after a commit that replaced a step, the old one.
  std::error_code ec;
  fs::remove_all(temp_dir_, ec);
  if (ec) core::log_warning("cannot remove the checkpoint temp folder {}: {}", temp_dir_, ec.message());
}

std::string CheckpointWriter::component_folder(const std::string& component) {
  const std::string folder = join(temp_dir_, component);
  std::error_code ec;
  fs::create_directory(folder, ec);
  if (ec) throw IoError(folder, fmt::format("cannot create the component folder: {}", ec.message()));
  return folder;
}

bool CheckpointWriter::has_file(const std::string& component, const std::string& file_name) const {
  const auto it = manifest_.components.find(component);
  return it != manifest_.components.end() && it->second.files.count(file_name) != 0;
}

void CheckpointWriter::record_file(const std::string& component, const std::string& file_name) {
  // Hashing what was written (from the page cache) checks the bytes the reader will see.
  const formats::MappedFile file(join(join(temp_dir_, component), file_name));
  manifest_.components[component].files[file_name] = FileRecord{file.size(), xxhash64(file.data(), file.size())};
}

void CheckpointWriter::add_tensors(const std::string& component, const std::string& file_stem,
                                   const std::vector<ShardedTensor>& shards) {
  RF_CHECK(!committed_, "checkpoint step {}: add_tensors after commit", step_);
  RF_CHECK(is_plain_name(component), "checkpoint component '{}' is not a plain folder name", component);
  RF_CHECK(is_plain_name(file_stem), "checkpoint file stem '{}' is not a plain file name", file_stem);
  const std::string file_name = file_stem + ".safetensors";
  RF_CHECK(!has_file(component, file_name), "checkpoint component '{}' already has {}", component, file_name);

  std::map<std::string, Shape> global_shapes;  // by name: from earlier calls, then from this one
  if (const auto saved = manifest_.components.find(component); saved != manifest_.components.end()) {
    for (const auto& [name, tensor] : saved->second.tensors) global_shapes[name] = tensor.global_shape;
  }
  std::map<std::string, int> num_shards_here;
  for (const ShardedTensor& s : shards) {
    RF_CHECK(!s.name.empty(), "{}/{}: a shard has an empty tensor name", component, file_name);
    RF_CHECK(!s.local.empty(), "{}/{}: the shard of '{}' is an empty view", component, file_name, s.name);
    const int rank = s.global_shape.rank();
    RF_CHECK(s.local.rank() == rank && s.global_offset.rank() == rank,
             "{}/{}: '{}' has local shape {}, global shape {} and offset {} of different ranks", component, file_name,
             s.name, s.local.shape().to_string(), s.global_shape.to_string(), s.global_offset.to_string());
    for (int d = 0; d < rank; ++d) {
      RF_CHECK(s.global_offset[d] >= 0 && s.global_offset[d] + s.local.size(d) <= s.global_shape[d],
               "{}/{}: the shard of '{}' at offset {} of shape {} leaves its global shape {}", component, file_name,
               s.name, s.global_offset.to_string(), s.local.shape().to_string(), s.global_shape.to_string());
    }
    const auto [it, first] = global_shapes.emplace(s.name, s.global_shape);
    RF_CHECK(first || it->second == s.global_shape, "{}/{}: '{}' has global shape {} here and {} in another shard",
             component, file_name, s.name, s.global_shape.to_string(), it->second.to_string());
    ++num_shards_here[s.name];
  }

  // A tensor with one shard in the file is stored under its own name, so the file reads like any
  // safetensors file; several shards of it in one file are told apart by their offsets.
  std::vector<std::pair<std::string, TensorView>> tensors;
  std::vector<std::pair<std::string, ShardRecord>> records;
  std::set<std::string> keys;
  for (const ShardedTensor& s : shards) {
    const std::string key =
        num_shards_here[s.name] == 1 ? s.name : fmt::format("{}@{}", s.name, join_extents(s.global_offset));
    RF_CHECK(keys.insert(key).second, "{}/{}: two shards of '{}' at offset {}", component, file_name, s.name,
             s.global_offset.to_string());
    tensors.emplace_back(key, s.local);
    records.emplace_back(s.name, ShardRecord{file_name, key, s.local.dtype(), s.global_offset, s.local.shape()});
  }
  formats::write_safetensors(join(component_folder(component), file_name), tensors);
  record_file(component, file_name);
  ComponentRecord& record = manifest_.components[component];
  for (auto& [name, shard] : records) {
    TensorRecord& tensor = record.tensors[name];
    tensor.global_shape = global_shapes[name];
    tensor.shards.push_back(std::move(shard));
  }
}

void CheckpointWriter::add_json(const std::string& component, const std::string& name, const nlohmann::json& value) {
  RF_CHECK(!committed_, "checkpoint step {}: add_json after commit", step_);
  RF_CHECK(is_plain_name(component), "checkpoint component '{}' is not a plain folder name", component);
  RF_CHECK(is_plain_name(name), "checkpoint JSON name '{}' is not a plain file name", name);
  const std::string file_name = name + ".json";
  RF_CHECK(!has_file(component, file_name), "checkpoint component '{}' already has {}", component, file_name);
  write_file_synced(join(component_folder(component), file_name), value.dump(2) + "\n");
  record_file(component, file_name);
  manifest_.components[component].json_files[name] = file_name;
}

void CheckpointWriter::add_file(const std::string& component, const std::string& file_name,
                                const std::string& contents) {
  RF_CHECK(!committed_, "checkpoint step {}: add_file after commit", step_);
  RF_CHECK(is_plain_name(component), "checkpoint component '{}' is not a plain folder name", component);
  RF_CHECK(is_plain_name(file_name), "checkpoint file name '{}' is not a plain file name", file_name);
  RF_CHECK(!has_file(component, file_name), "checkpoint component '{}' already has {}", component, file_name);
  write_file_synced(join(component_folder(component), file_name), contents);
  record_file(component, file_name);
}

void CheckpointWriter::commit() {
  RF_CHECK(!committed_, "checkpoint step {}: commit called twice", step_);
  committed_ = true;  // a failed commit is not retried: the caller starts a new writer
  if (!group_) {
    publish();
    return;
  }
  constexpr const char* kPublished = "published";
  const std::vector<std::string> parts = dist::all_gather_texts(*group_, manifest_to_json(manifest_).dump());
  if (group_->rank() != 0) {
    if (dist::broadcast_text(*group_, "", 0) != kPublished)
      throw IoError(root_dir_, fmt::format("rank 0 could not publish step {} (its error says why)", step_));
    return;
  }
  try {
    manifest_ = Manifest{step_, {}};
    for (size_t r = 0; r < parts.size(); ++r)
      merge_manifest(manifest_, manifest_from_json(nlohmann::json::parse(parts[r]), fmt::format("rank {}", r)), int(r));
    publish();
  } catch (...) {
    dist::broadcast_text(*group_, "failed", 0);
    throw;
  }
  dist::broadcast_text(*group_, kPublished, 0);
}

void CheckpointWriter::publish() {
  write_file_synced(join(temp_dir_, kManifestFileName), manifest_to_json(manifest_).dump(2) + "\n");
  for (const auto& [component, record] : manifest_.components) sync_folder(join(temp_dir_, component));
  sync_folder(temp_dir_);

  const std::string step_dir = join(root_dir_, step_folder_name(step_));
  std::string old_contents;
  if (fs::exists(step_dir)) {
    old_contents = replace_folder(temp_dir_, step_dir,
                                  join(root_dir_, fmt::format(".{}.old.{}", step_folder_name(step_), unique_suffix())));
  } else {
    rename_path(temp_dir_, step_dir);
  }
  sync_folder(root_dir_);

  // The pointer moves only now that the folder it names is complete and durable.
  const std::string pointer = join(root_dir_, kLatestFileName);
  const std::string pointer_temp = join(root_dir_, fmt::format(".{}.tmp.{}", kLatestFileName, unique_suffix()));
  try {
    write_file_synced(pointer_temp, std::to_string(step_));
    rename_path(pointer_temp, pointer);
  } catch (const IoError&) {
    std::error_code ec;
    fs::remove(pointer_temp, ec);
    throw;
  }
  sync_folder(root_dir_);

  if (!old_contents.empty()) {
    std::error_code ec;
    fs::remove_all(old_contents, ec);
    if (ec) core::log_warning("cannot remove the replaced checkpoint folder {}: {}", old_contents, ec.message());
  }
}

}  // namespace rf::checkpoint
