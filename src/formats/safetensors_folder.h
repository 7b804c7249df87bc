// SafetensorsFolder: the weights of a Hugging Face model folder as one set of named tensors, whether
// they are one `model.safetensors` or shards listed by `model.safetensors.index.json`
// ({"metadata": {"total_size": ...}, "weight_map": {tensor name: shard file name}}). Like
// transformers, a folder holding both uses `model.safetensors`.
//
// Everything is checked when the folder is opened: each shard as SafetensorsReader checks a file,
// and the index against the shards: its weight_map values are plain file names in the folder (no
// '/', so an index cannot point outside it), every shard it names exists, every tensor is in the
// shard the index names, and no shard holds a tensor the index places elsewhere or does not list
// (so no tensor is in two shards). `metadata.total_size` is informational and not checked: hub
// repositories disagree on what it counts. Errors are IoError naming the file at fault.
// split() says how the weights were laid out, so a writer can put them back the same way.
// Writing a folder is safetensors_folder_writer.h.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors_reader.h"

namespace rf::formats {

inline constexpr const char* kSafetensorsFileName = "model.safetensors";
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

// How a folder's weights are split into files.
struct SafetensorsSplit {
  std::map<std::string, std::string> file_of;  // tensor name -> file name in the folder
  // A sharded folder's index without its weight_map ({"metadata": {"total_size": ...}}, plus whatever
  // else the saver put there, such as transformers' total_parameters), kept to be written back as it
  // was; nullopt for one model.safetensors without an index.
  std::optional<nlohmann::json> index;
  bool operator==(const SafetensorsSplit&) const = default;
};

class SafetensorsFolder {
 public:
  explicit SafetensorsFolder(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> files() const;  // the paths of the files read, sorted
  std::vector<std::string> names() const;  // every tensor, sorted
  bool contains(const std::string& name) const { return owner_.count(name) != 0; }
  // The file holding `name`; IoError naming the folder when no file does.
  const SafetensorsReader& file_of(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const { return file_of(name).entry(name); }
  const SafetensorsSplit& split() const { return split_; }
  // As SafetensorsReader::read_into / read: a copy, converted between floating dtypes.
  void read_into(const std::string& name, TensorView dst) const { file_of(name).read_into(name, dst); }
  Tensor read(const std::string& name, DType dtype, TensorAccount account = {}) const {
    return file_of(name).read(name, dtype, account);
  }

 private:
  void open_sharded(const std::string& index_path);

  std::string dir_;
  std::map<std::string, SafetensorsReader> files_;          // by file name within dir_
  std::map<std::string, const SafetensorsReader*> owner_;   // tensor name -> the file holding it
  SafetensorsSplit split_;
};

}  // namespace rf::formats
