// Writes one `.safetensors` file: the format SafetensorsReader reads (an 8-byte little-endian header
// length, a JSON header, then the tensor bytes). The header is padded with spaces to a multiple of 8
// bytes, and tensors are laid out by descending element size, so that every tensor starts at an
// offset aligned to its element size once the file is memory-mapped (as the Hugging Face writer does).
// The file is written to `path + ".tmp"`, fsynced, and renamed over `path`, so a reader never sees a
// half-written file under the final name. Sharded folders with an index belong to the Hugging Face
// interop layer built on this.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor_view.h"

namespace rf::formats {

// Writes `tensors` (any dtype, any strides: non-contiguous views are copied to contiguous buffers
// first) and `metadata` (stored as the header's "__metadata__" string map, omitted when empty).
// Names must be non-empty, unique and not "__metadata__" (rf::Error otherwise). Throws IoError naming
// `path` when the file cannot be created, written, synced or renamed; the temp file is removed then.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// DType -> safetensors dtype name ("F32", "BF16", ...): the inverse of safetensors_dtype().
std::string_view safetensors_dtype_name(DType dtype);

}  // namespace rf::formats
