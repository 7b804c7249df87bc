// Writes one `.safetensors` file: the format SafetensorsReader reads (an 8-byte little-endian header
// length, a JSON header, then the tensor bytes), byte for byte what Hugging Face's writer produces
// for the same tensors and metadata: tensors ordered as its Dtype enum, descending (I64, F64, F32,
// I32, BF16, F16, U8, BOOL), then by name, which also keeps every tensor aligned to its element size
// once the file is memory-mapped; compact JSON with each entry's keys in the order dtype, shape,
// data_offsets; the header padded with spaces to a multiple of 8 bytes. (HF writes a metadata map
// of several keys in hash order; ours is sorted.)
// The file is written to `path + ".tmp"`, fsynced, and renamed over `path`, so a reader never sees a
// half-written file under the final name. Sharded folders with an index are safetensors_folder_writer.h.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor_view.h"
#include "formats/safetensors_format.h"

namespace rf::formats {

// Writes `tensors` (any dtype, any strides: non-contiguous views are copied to contiguous buffers
// first) and `metadata` (stored as the header's "__metadata__" string map, omitted when empty).
// Names must be non-empty, unique and not "__metadata__" (rf::Error otherwise). Throws IoError naming
// `path` when the file cannot be created, written, synced or renamed; the temp file is removed then.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace rf::formats
