// Reads one `.safetensors` file by memory map. The whole layout is validated when the file is
// opened (safetensors_format.h lists every rule; they match Hugging Face's reader), so a bad file
// raises IoError naming the file, the tensor and the problem before any tensor byte is used.
// Folders of shards with an index are safetensors_folder.h; the writer is safetensors_writer.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/mapped_file.h"
#include "formats/safetensors_format.h"

namespace rf::formats {

class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return layout_.entries.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return layout_.metadata; }
  // Read-only view onto the mapped bytes (stored dtype). Do not write through it. IoError when the
  // tensor is not aligned to its element size (possible in files from old writers): read() it then.
  TensorView view(const std::string& name) const;
  // Copies the tensor into `dst` (its shape, any strides), converting between floating dtypes.
  void read_into(const std::string& name, TensorView dst) const;
  // A copy converted to `dtype` (e.g. bf16 weights loaded for an f64 oracle run).
  Tensor read(const std::string& name, DType dtype, TensorAccount account = {}) const;

 private:
  const std::byte* data_section() const { return file_.data() + layout_.data_start; }

  MappedFile file_;
  SafetensorsLayout layout_;
};

}  // namespace rf::formats
