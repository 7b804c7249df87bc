// The manifest of one checkpoint step (`global_step_<k>/manifest.json`): every file of the step with
// its byte size and XXH64 checksum, every tensor with its global shape and the shards that hold it,
// and the JSON documents. It is written last, so a step folder without one is incomplete.
//
//   {"format": "rlforge-checkpoint", "version": 1, "step": 3, "checksum": "xxh64",
//    "components": {"actor": {
//      "files":   {"model.safetensors": {"bytes": 1096, "xxh64": "5f0e..."}, "trainer.json": {...}},
//      "tensors": {"lm_head.weight": {"global_shape": [6, 4], "shards": [
//                   {"file": "model.safetensors", "key": "lm_head.weight", "dtype": "F32",
//                    "global_offset": [0, 0], "shape": [6, 4]}]}},
//      "json":    {"trainer": "trainer.json"}}}}
//
// A shard is the box [global_offset, global_offset + shape) of its tensor, stored under `key` in a
// safetensors file of its component; any set of boxes is valid (overlaps included, e.g. replicas), so
// a tensor split across ranks is described the same way as a whole one. Reading and writing files is
// not here: see CheckpointWriter and CheckpointReader.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace rf::checkpoint {

inline constexpr int kManifestVersion = 1;
inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kLatestFileName = "latest_checkpointed_iteration.txt";  // verl's name

// "global_step_<k>" (verl's name).
std::string step_folder_name(int64_t step);
// Component folder names and file stems are single path segments: non-empty, no '/', and not
// starting with '.', which is kept for temp files and folders.
bool is_plain_name(std::string_view name);

struct FileRecord {
  uint64_t num_bytes = 0;
  uint64_t checksum = 0;  // XXH64, seed 0
};

struct ShardRecord {
  std::string file;  // in the component's folder
  std::string key;   // the tensor's name inside that safetensors file
  DType dtype = DType::f32;
  Shape global_offset;
  Shape shape;
};

struct TensorRecord {
  Shape global_shape;
  std::vector<ShardRecord> shards;
};

struct ComponentRecord {
  std::map<std::string, FileRecord> files;        // by file name
  std::map<std::string, TensorRecord> tensors;    // by tensor name
  std::map<std::string, std::string> json_files;  // document name -> file name
};

struct Manifest {
  int64_t step = 0;
  std::map<std::string, ComponentRecord> components;
};

nlohmann::json manifest_to_json(const Manifest& manifest);
// Validates everything a reader relies on (known format and version, plain names, shards inside
// their global shape and listed in `files`); throws IoError naming `path` and the bad entry.
Manifest manifest_from_json(const nlohmann::json& json, const std::string& path);

// Adds `part`, what rank `rank` of a collective save wrote, to `whole`. rf::Error naming the component
// and entry when two ranks wrote the same file or JSON document, or disagree on a tensor's global shape.
void merge_manifest(Manifest& whole, const Manifest& part, int rank);

}  // namespace rf::checkpoint
