// CheckpointReader: opens one step written by CheckpointWriter (layout in checkpoint_writer.h) and
// loads any region of any saved tensor into the caller's buffer, whatever the parallel layout it
// was saved at: the region is assembled from the shards that overlap it.
//
// Everything is checked when the step is opened, before anything is loaded: the manifest, every
// file's presence, size and XXH64 checksum, and that every shard the manifest lists is in its file
// with the recorded dtype and shape. A truncated, corrupt or missing file is an IoError naming it.
// Shard files stay memory-mapped while the reader lives, so a load copies straight from the page cache.
//
// Not here: choosing which step to resume (the trainer asks latest_step), HF import.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "core/tensor_view.h"
#include "formats/safetensors_reader.h"

namespace rf::checkpoint {

class CheckpointReader {
 public:
  // The step named by <root_dir>/latest_checkpointed_iteration.txt, or nullopt if there is no such
  // file (nothing saved yet). IoError naming the file if it does not hold a step number, or names a
  // step whose folder does not exist.
  static std::optional<int64_t> latest_step(const std::string& root_dir);

  // Opens <root_dir>/global_step_<step> and validates it (see above). IoError names the file and what
  // is wrong: "missing", "truncated: expected N bytes, got M", "checksum mismatch", a malformed manifest.
  CheckpointReader(std::string root_dir, int64_t step);

  int64_t step() const { return manifest_.step; }
  const std::string& step_dir() const { return step_dir_; }
  std::vector<std::string> components() const;  // sorted
  // Sorted names of the tensors saved in `component`. IoError naming the manifest for an unknown
  // component, here and below; likewise for an unknown tensor or JSON document.
  std::vector<std::string> tensor_names(const std::string& component) const;
  Shape global_shape(const std::string& component, const std::string& name) const;
  // IoError naming the step folder, the tensor and both values unless the saved tensor has `global_shape`
  // and every shard of it `dtype`: a checkpoint of another model (fewer layers, a smaller hidden size) is
  // refused before anything is read, never loaded as the top-left box of each tensor.
  void expect_tensor(const std::string& component, const std::string& name, const Shape& global_shape,
                     DType dtype) const;

  // Fills `dst` (any strides) with the region [global_offset, global_offset + dst.shape()) of the
  // saved tensor, from whichever shards overlap it. Converts between floating dtypes (f32 saved, bf16
  // wanted); integer and bool tensors are read only into their own dtype. IoError naming the step
  // folder if the region leaves the global shape or some element of it is in no shard, and then
  // `dst` is left untouched.
  void read_tensor(const std::string& component, const std::string& name, TensorView dst,
                   const Shape& global_offset) const;
  // The whole tensor: `dst` must have its global shape.
  void read_tensor(const std::string& component, const std::string& name, TensorView dst) const;

  nlohmann::json read_json(const std::string& component, const std::string& name) const;
  // Whether the step holds that JSON document (a later version may add documents an older step lacks).
  bool has_json(const std::string& component, const std::string& name) const;

 private:
  const ComponentRecord& component(const std::string& component) const;
  const TensorRecord& tensor(const std::string& component, const std::string& name) const;
  std::string file_path(const std::string& component, const std::string& file) const;

  std::string step_dir_;
  std::string manifest_path_;
  Manifest manifest_;
  std::map<std::string, formats::SafetensorsReader> shard_files_;  // by path
};

}  // namespace rf::checkpoint
