#include "formats/safetensors_reader.h"

#include <fmt/format.h>

namespace rf::formats {

SafetensorsReader::SafetensorsReader(const std::string& path)
    : file_(path), layout_(parse_safetensors(path, {file_.data(), file_.size()})) {}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : layout_.entries) out.push_back(name);
  return out;
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const auto it = layout_.entries.find(name);
  if (it == layout_.entries.end()) throw IoError(path(), fmt::format("no tensor named '{}'", name));
  return it->second;
}

TensorView SafetensorsReader::view(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const std::byte* data = data_section() + e.begin;
  // The map starts on a page boundary, so the address is aligned iff the file offset is.
  if ((layout_.data_start + e.begin) % dtype_size(e.dtype) != 0)
    throw IoError(path(), fmt::format("tensor '{}' starts at file offset {}, not a multiple of its {}-byte elements; "
                                      "read() copies it instead",
                                      name, layout_.data_start + e.begin, dtype_size(e.dtype)));
  return TensorView(const_cast<std::byte*>(data), e.dtype, e.shape);
}

void SafetensorsReader::read_into(const std::string& name, TensorView dst) const {
  copy_safetensors_entry(path(), name, entry(name), data_section(), dst);
}

Tensor SafetensorsReader::read(const std::string& name, DType dtype, TensorAccount account) const {
  Tensor out(entry(name).shape, dtype, account);
  read_into(name, out);
  return out;
}

}  // namespace rf::formats
