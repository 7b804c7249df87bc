// The safetensors format on bytes already in memory, with no I/O: parse and validate a whole file's
// bytes into its layout, and copy one tensor out of them. SafetensorsReader (a mapped file) and the
// fuzz target (tests/formats/fuzz_safetensors.cpp) both go through here, so what is fuzzed is what
// loads models.
//
// A file is an 8-byte little-endian header length n, n bytes of JSON
//   {"__metadata__": {string: string}, name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// and then the data section, in which every tensor owns the bytes [begin, end).
//
// What is accepted is what Hugging Face's own reader (safetensors, tensor.rs `read_metadata` and
// `Metadata::validate`) accepts, except where noted (*):
//   - n <= kMaxSafetensorsHeaderBytes, and the header lies inside the file;
//   - the header is one JSON object (trailing spaces are the writers' padding; anything else after
//     it is an error), "__metadata__" absent, null or an object of strings;
//   - (*) no name appears twice (HF keeps the last silently);
//   - each entry is an object with a known dtype, a shape of non-negative integers and data_offsets,
//     an array of exactly two non-negative integers begin <= end; other keys are ignored;
//   - (*) at most 6 dimensions, and the extents other than 0 multiply to at most 2^63 - 1 bytes
//     (HF: the running product must fit 64 bits), so no size computed from a shape can overflow;
//   - end - begin = (product of the extents) x (dtype size);
//   - the ranges, sorted, tile the data section exactly: the first starts at 0, each starts where
//     the previous ends (no hole, no overlap), and the last ends at the end of the file (no
//     trailing bytes). Empty tensors are zero-width ranges anywhere on that tiling;
//   - (*) BOOL bytes are 0 or 1 (any other byte is not a bool, and reading it as one is undefined).
// Unaligned tensors are accepted (writers before safetensors 0.3 did not pad the header to 8 bytes):
// copy_safetensors_entry handles any alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor_view.h"

namespace rf::formats {

// Hugging Face's MAX_HEADER_SIZE: a header beyond it is refused before any of it is parsed.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  size_t begin = 0;  // byte offsets [begin, end) in the data section, which follows the header
  size_t end = 0;
};

struct SafetensorsLayout {
  size_t data_start = 0;  // 8 + the header length: where the data section starts in the file
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Validates `file` (the whole file's bytes) as described above. Throws IoError(path, ...) whose
// message names the tensor (when one is at fault) and the problem.
SafetensorsLayout parse_safetensors(const std::string& path, std::span<const std::byte> file);

// Copies `entry`, whose bytes start at data_section + entry.begin, into `dst` (the entry's shape,
// any strides). The dtypes must be equal or both floating (converted then, rounding to nearest
// even); IoError(path, ...) otherwise.
void copy_safetensors_entry(const std::string& path, const std::string& name, const SafetensorsEntry& entry,
                            const std::byte* data_section, TensorView dst);

// Safetensors dtype names ("F32", "BF16", ...) <-> DType. The names rlforge has no DType for
// (I8, U16, F8_E4M3, ...) are errors like unknown names: rf::Error naming the text.
DType safetensors_dtype(std::string_view name);
std::string_view safetensors_dtype_name(DType dtype);

}  // namespace rf::formats
