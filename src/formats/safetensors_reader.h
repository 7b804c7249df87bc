// Reads one `.safetensors` file by memory map: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}}, then the bytes.
// Every entry is validated (known dtype, offsets inside the file, byte count = shape x dtype size)
// and a bad one raises IoError naming the file and tensor. The writer is safetensors_writer.h;
// sharded folders with an index belong to the Hugging Face interop layer built on this.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/mapped_file.h"

namespace rf::formats {

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  size_t begin = 0;  // byte offsets [begin, end) in the data section, which follows the header
  size_t end = 0;
};

class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // Read-only view onto the mapped bytes (stored dtype). Do not write through it.
  TensorView view(const std::string& name) const;
  // A copy converted to `dtype` (e.g. bf16 weights loaded for an f64 oracle run).
  Tensor read(const std::string& name, DType dtype, TensorAccount account = {}) const;

 private:
  MappedFile file_;
  size_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
};

// Safetensors dtype names ("F32", "BF16", ...) <-> DType; throws IoError-worthy rf::Error on unknown.
DType safetensors_dtype(const std::string& name);

}  // namespace rf::formats
