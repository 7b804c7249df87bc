#include "checkpoint/checkpoint_reader.h"

#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "checkpoint/durable_file.h"
#include "checkpoint/xxhash64.h"
#include "core/tensor.h"

namespace rf::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string join(const std::string& folder, const std::string& name) { return (fs::path(folder) / name).string(); }

// A box [lo, hi) of a tensor in global coordinates.
struct Box {
  Shape lo, hi;
};

std::string box_text(const Box& box) {
  std::vector<std::string> dims;
  for (int d = 0; d < box.lo.rank(); ++d) dims.push_back(fmt::format("{}:{}", box.lo[d], box.hi[d]));
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

Box box_at(const Shape& offset, const Shape& shape) {
  Box box{offset, offset};
  for (int d = 0; d < shape.rank(); ++d) box.hi[d] += shape[d];
  return box;
}

// The overlap of a and b, or nullopt if they share no element.
std::optional<Box> intersect(const Box& a, const Box& b) {
  Box out = a;
  for (int d = 0; d < a.lo.rank(); ++d) {
    out.lo[d] = std::max(a.lo[d], b.lo[d]);
    out.hi[d] = std::min(a.hi[d], b.hi[d]);
    if (out.lo[d] >= out.hi[d]) return std::nullopt;
  }
  return out;
}

// The first cell of `region` that none of `pieces` (each inside `region`) covers, or nullopt.
// Cutting every dim at every piece boundary makes cells that each lie wholly inside or wholly outside
// each piece, so testing one corner per cell is exact even when pieces overlap (replicated shards).
// The cost is the number of cells, (2 x pieces + 1)^rank at worst and small for real layouts, which
// split one or two dims; no per-element mask is allocated.
std::optional<Box> find_uncovered(const Box& region, const std::vector<Box>& pieces) {
  const int rank = region.lo.rank();
  std::array<std::vector<int64_t>, kMaxDims> cuts;
  for (int d = 0; d < rank; ++d) {
    cuts[d] = {region.lo[d], region.hi[d]};
    for (const Box& p : pieces) {
      cuts[d].push_back(p.lo[d]);
      cuts[d].push_back(p.hi[d]);
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
  }
  std::array<size_t, kMaxDims> cell{};
  while (true) {
    Box box = region;
    for (int d = 0; d < rank; ++d) {
      box.lo[d] = cuts[d][cell[d]];
      box.hi[d] = cuts[d][cell[d] + 1];
    }
    const bool covered = std::any_of(pieces.begin(), pieces.end(), [&](const Box& p) {
      for (int d = 0; d < rank; ++d)
        if (box.lo[d] < p.lo[d] || box.lo[d] >= p.hi[d]) return false;
      return true;
    });
    if (!covered) return box;
    int d = rank - 1;
    for (; d >= 0; --d) {
      if (++cell[d] + 1 < cuts[d].size()) break;
      cell[d] = 0;
    }
    if (d < 0) return std::nullopt;
  }
}

// Checks that `path` exists with the size and checksum the manifest records.
void verify_file(const std::string& path, const FileRecord& record) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw IoError(path, fmt::format("missing (listed in {})", kManifestFileName));
    throw IoError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw IoError(path, "is not a regular file");
  const uint64_t num_bytes = uint64_t(st.st_size);
  if (num_bytes != record.num_bytes) {
    throw IoError(path, fmt::format("{}expected {} bytes, got {}", num_bytes < record.num_bytes ? "truncated: " : "",
                                    record.num_bytes, num_bytes));
  }
  const formats::MappedFile file(path);
  const uint64_t checksum = xxhash64(file.data(), file.size());
  if (checksum != record.checksum) {
    throw IoError(path, fmt::format("checksum mismatch: {} records xxh64 {:016x}, the file has {:016x}",
                                    kManifestFileName, record.checksum, checksum));
  }
}

bool convertible(DType from, DType to) { return from == to || (is_floating(from) && is_floating(to)); }

}  // namespace

std::optional<int64_t> CheckpointReader::latest_step(const std::string& root_dir) {
  const std::string pointer = join(root_dir, kLatestFileName);
  std::error_code ec;
  const fs::file_status status = fs::status(pointer, ec);
  if (status.type() == fs::file_type::not_found) return std::nullopt;
  if (!fs::is_regular_file(status)) throw IoError(pointer, "is not a regular file");
  const std::string text = read_text_file(pointer);
  // verl writes the bare number; a trailing newline from an editor or `echo` is accepted too.
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  const auto first = std::find_if_not(text.begin(), text.end(), is_space);
  const auto last = std::find_if_not(text.rbegin(), text.rend(), is_space).base();
  const std::string number = first < last ? std::string(first, last) : std::string();
  int64_t step = -1;
  const auto [end, parse_error] = std::from_chars(number.data(), number.data() + number.size(), step);
  if (number.empty() || parse_error != std::errc() || end != number.data() + number.size() || step < 0) {
    throw IoError(pointer, fmt::format("expected a step number, got '{}'", number.substr(0, 40)));
  }
  const std::string step_dir = join(root_dir, step_folder_name(step));
  if (!fs::is_directory(step_dir)) throw IoError(pointer, fmt::format("names step {}, but {} does not exist", step, step_dir));
  return step;
}

CheckpointReader::CheckpointReader(std::string root_dir, int64_t step)
    : step_dir_(join(root_dir, step_folder_name(step))), manifest_path_(join(step_dir_, kManifestFileName)) {
  if (!fs::is_directory(step_dir_)) throw IoError(step_dir_, "missing: no such checkpoint folder");
  // The manifest is written last, so a folder without one was never completed (or is not ours).
  if (!fs::exists(manifest_path_)) throw IoError(manifest_path_, "missing: the checkpoint is incomplete");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_text_file(manifest_path_));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(manifest_path_, fmt::format("not valid JSON: {}", e.what()));
  }
  manifest_ = manifest_from_json(json, manifest_path_);
  if (manifest_.step != step)
    throw IoError(manifest_path_, fmt::format("records step {}, but lies in {}", manifest_.step, step_folder_name(step)));

  for (const auto& [component_name, record] : manifest_.components) {
    for (const auto& [file_name, file] : record.files) verify_file(file_path(component_name, file_name), file);
  }
  for (const auto& [component_name, record] : manifest_.components) {
    for (const auto& [name, tensor] : record.tensors) {
      for (const ShardRecord& shard : tensor.shards) {
        const std::string path = file_path(component_name, shard.file);
        const formats::SafetensorsReader& file = shard_files_.try_emplace(path, path).first->second;
        if (!file.contains(shard.key))
          throw IoError(path, fmt::format("has no tensor '{}' (a shard of '{}' in the manifest)", shard.key, name));
        const formats::SafetensorsEntry& entry = file.entry(shard.key);
        if (entry.dtype != shard.dtype || !(entry.shape == shard.shape)) {
          throw IoError(path, fmt::format("'{}' is {}{}, but the manifest records {}{}", shard.key, dtype_name(entry.dtype),
                                          entry.shape.to_string(), dtype_name(shard.dtype), shard.shape.to_string()));
        }
      }
    }
  }
}

std::vector<std::string> CheckpointReader::components() const {
  std::vector<std::string> out;
  for (const auto& [name, record] : manifest_.components) out.push_back(name);
  return out;
}

std::vector<std::string> CheckpointReader::tensor_names(const std::string& component_name) const {
  std::vector<std::string> out;
  for (const auto& [name, record] : component(component_name).tensors) out.push_back(name);
  return out;
}

Shape CheckpointReader::global_shape(const std::string& component_name, const std::string& name) const {
  return tensor(component_name, name).global_shape;
}

void CheckpointReader::expect_tensor(const std::string& component_name, const std::string& name,
                                     const Shape& global_shape, DType dtype) const {
  const TensorRecord& record = tensor(component_name, name);
  if (record.global_shape != global_shape)
    throw IoError(step_dir_, fmt::format("{}/{} was saved with shape {}, but the run's model has {}: the checkpoint "
                                         "holds another model",
                                         component_name, name, record.global_shape.to_string(), global_shape.to_string()));
  for (const ShardRecord& shard : record.shards)
    if (shard.dtype != dtype)
      throw IoError(step_dir_, fmt::format("{}/{} was saved as {} (in {}), but the run holds it as {}", component_name,
                                           name, dtype_name(shard.dtype), shard.file, dtype_name(dtype)));
}

void CheckpointReader::read_tensor(const std::string& component_name, const std::string& name, TensorView dst,
                                   const Shape& global_offset) const {
  RF_CHECK(!dst.empty(), "read_tensor '{}': the destination is an empty view", name);
  const TensorRecord& record = tensor(component_name, name);
  const std::string what = fmt::format("{}/{}", component_name, name);
  const int rank = record.global_shape.rank();
  if (dst.rank() != rank || global_offset.rank() != rank) {
    throw IoError(step_dir_, fmt::format("{} was saved with global shape {}; cannot read a region of shape {} at offset {}",
                                         what, record.global_shape.to_string(), dst.shape().to_string(),
                                         global_offset.to_string()));
  }
  const Box region = box_at(global_offset, dst.shape());
  for (int d = 0; d < rank; ++d) {
    if (region.lo[d] < 0 || region.hi[d] > record.global_shape[d]) {
      throw IoError(step_dir_, fmt::format("{}: region {} leaves the saved global shape {}", what, box_text(region),
                                           record.global_shape.to_string()));
    }
  }
  if (dst.numel() == 0) return;

  struct Piece {
    const ShardRecord* shard;
    Box box;  // the part of the region this shard holds
  };
  std::vector<Piece> pieces;
  std::vector<Box> boxes;
  for (const ShardRecord& shard : record.shards) {
    const std::optional<Box> overlap = intersect(region, box_at(shard.global_offset, shard.shape));
    if (!overlap) continue;
    if (!convertible(shard.dtype, dst.dtype())) {
      throw IoError(file_path(component_name, shard.file),
                    fmt::format("{} is saved as {} and cannot be read into {}", what, dtype_name(shard.dtype),
                                dtype_name(dst.dtype())));
    }
    pieces.push_back({&shard, *overlap});
    boxes.push_back(*overlap);
  }
  if (const std::optional<Box> hole = find_uncovered(region, boxes)) {
    throw IoError(step_dir_, fmt::format("{}: elements {} of the requested region {} are in no saved shard", what,
                                         box_text(*hole), box_text(region)));
  }

  for (const Piece& piece : pieces) {
    TensorView src = shard_files_.at(file_path(component_name, piece.shard->file)).view(piece.shard->key);
    TensorView to = dst;
    for (int d = 0; d < rank; ++d) {
      const int64_t length = piece.box.hi[d] - piece.box.lo[d];
      src = src.slice(d, piece.box.lo[d] - piece.shard->global_offset[d], length);
      to = to.slice(d, piece.box.lo[d] - region.lo[d], length);
    }
    // Whole rows of a row-major shard into a contiguous buffer (the common resharding) are one memcpy.
    if (src.dtype() == to.dtype() && src.is_contiguous() && to.is_contiguous()) {
      std::memcpy(to.raw(), src.raw(), src.nbytes());
    } else {
      copy_convert(src, to);
    }
  }
}

void CheckpointReader::read_tensor(const std::string& component_name, const std::string& name, TensorView dst) const {
  Shape origin;
  for (int d = 0; d < dst.rank(); ++d) origin.push_back(0);
  const Shape& saved = tensor(component_name, name).global_shape;
  if (!(dst.shape() == saved)) {
    throw IoError(step_dir_, fmt::format("{}/{} was saved with global shape {}, the destination has shape {}",
                                         component_name, name, saved.to_string(), dst.shape().to_string()));
  }
  read_tensor(component_name, name, dst, origin);
}

bool CheckpointReader::has_json(const std::string& component_name, const std::string& name) const {
  const auto it = manifest_.components.find(component_name);
  return it != manifest_.components.end() && it->second.json_files.contains(name);
}

nlohmann::json CheckpointReader::read_json(const std::string& component_name, const std::string& name) const {
  const ComponentRecord& record = component(component_name);
  const auto it = record.json_files.find(name);
  if (it == record.json_files.end())
    throw IoError(manifest_path_, fmt::format("component '{}' has no JSON document '{}'", component_name, name));
  const std::string path = file_path(component_name, it->second);
  try {
    return nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path, fmt::format("not valid JSON: {}", e.what()));
  }
}

const ComponentRecord& CheckpointReader::component(const std::string& component_name) const {
  const auto it = manifest_.components.find(component_name);
  if (it == manifest_.components.end()) {
    throw IoError(manifest_path_,
                  fmt::format("no component '{}' (saved: {})", component_name, fmt::join(components(), ", ")));
  }
  return it->second;
}

const TensorRecord& CheckpointReader::tensor(const std::string& component_name, const std::string& name) const {
  const ComponentRecord& record = component(component_name);
  const auto it = record.tensors.find(name);
  if (it == record.tensors.end())
    throw IoError(manifest_path_, fmt::format("component '{}' has no tensor '{}'", component_name, name));
  return it->second;
}

std::string CheckpointReader::file_path(const std::string& component_name, const std::string& file) const {
  return join(join(step_dir_, component_name), file);
}

}  // namespace rf::checkpoint
