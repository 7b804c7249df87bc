#include "formats/safetensors_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "core/tensor.h"

namespace rf::formats {
namespace {

// The format stores little-endian values; using the bytes as they are is only right on such a host.
static_assert(std::endian::native == std::endian::little, "safetensors reading assumes a little-endian host");

using Json = nlohmann::json;

std::optional<DType> find_dtype(std::string_view name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  if (name == "F64") return DType::f64;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  if (name == "U8") return DType::u8;
  if (name == "BOOL") return DType::boolean;
  return std::nullopt;
}

// An untrusted JSON value, shown in a message: short, and never through dump() of a container,
// which recurses and so could overflow the stack on a deeply nested header.
std::string describe(const Json& value) {
  constexpr size_t kMaxChars = 64;
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    return fmt::format("\"{}{}\"", text.substr(0, kMaxChars), text.size() > kMaxChars ? "..." : "");
  }
  if (value.is_primitive()) return value.dump();
  return fmt::format("an {}", value.type_name());  // "an array", "an object"
}

// A JSON integer >= 0. Floats such as 2.0 are refused, as HF's reader refuses them for usize fields.
std::optional<uint64_t> as_count(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return uint64_t(value.get<int64_t>());
  return std::nullopt;
}

// The file and the tensor a problem is in, for the message.
struct Where {
  const std::string& path;
  const std::string& name;

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw IoError(path, fmt::format("tensor '{}': {}", name, fmt::format(format, std::forward<Args>(args)...)));
  }
};

// Parses the header text, refusing a name given twice at the top level: nlohmann (like HF's serde)
// would keep the last silently, and then which bytes a name means depends on the parser.
Json parse_header_json(const std::string& path, const char* begin, const char* end) {
  // nlohmann stops at a NUL as if the input ended there, which would accept any bytes after it;
  // JSON text cannot hold a raw NUL, and HF's reader refuses one.
  if (const void* nul = std::memchr(begin, '\0', size_t(end - begin)))
    throw IoError(path, fmt::format("header is not valid JSON: a NUL byte at offset {} of the header",
                                    static_cast<const char*>(nul) - begin));
  std::set<std::string> names;
  std::optional<std::string> duplicate;
  const auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && !duplicate &&
        !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header;
  try {
    header = Json::parse(begin, end, on_event);
  } catch (const Json::exception& e) {
    throw IoError(path, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (duplicate) throw IoError(path, fmt::format("header names tensor '{}' twice", *duplicate));
  if (!header.is_object()) throw IoError(path, fmt::format("header is not a JSON object but {}", describe(header)));
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const Json& value) {
  std::map<std::string, std::string> metadata;
  if (value.is_null()) return metadata;  // HF reads null as "no metadata"
  if (!value.is_object())
    throw IoError(path, fmt::format("__metadata__ is {}, not an object of strings", describe(value)));
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string())
      throw IoError(path, fmt::format("__metadata__ '{}' is {}, not a string", key, describe(text)));
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

const Json& required(const Where& where, const Json& info, const char* key) {
  const auto it = info.find(key);
  if (it == info.end()) where.fail("no \"{}\"", key);
  return *it;
}

// One entry, checked on its own: known dtype, shape, offsets inside the data section, and a byte
// count equal to what the shape and dtype need.
SafetensorsEntry parse_entry(const Where& where, const Json& info, size_t data_size) {
  if (!info.is_object()) where.fail("the entry is {}, not an object", describe(info));
  SafetensorsEntry entry;

  const Json& dtype = required(where, info, "dtype");
  if (!dtype.is_string()) where.fail("\"dtype\" is {}, not a string", describe(dtype));
  const std::optional<DType> known = find_dtype(dtype.get_ref<const std::string&>());
  if (!known)
    where.fail("unsupported safetensors dtype {}: expected F32, BF16, F16, F64, I32, I64, U8 or BOOL", describe(dtype));
  entry.dtype = *known;

  const Json& shape = required(where, info, "shape");
  if (!shape.is_array()) where.fail("\"shape\" is {}, not an array", describe(shape));
  if (shape.size() > size_t(kMaxDims))
    where.fail("\"shape\" has {} dimensions; rlforge tensors have at most {}", shape.size(), kMaxDims);
  std::vector<uint64_t> extents;
  for (const Json& extent : shape) {
    const std::optional<uint64_t> count = as_count(extent);
    if (!count) where.fail("\"shape\" holds {}, not a non-negative integer", describe(extent));
    extents.push_back(*count);
  }
  // Checked products: a wrapped-around count could match the byte range. Zeros are skipped so that
  // no partial product of the extents (numel, strides) can overflow anywhere later either.
  uint64_t nonzero_bytes = dtype_size(entry.dtype);
  bool has_zero = false;
  for (uint64_t extent : extents) {
    if (extent == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero_bytes, extent, &nonzero_bytes) ||
               nonzero_bytes > uint64_t(std::numeric_limits<int64_t>::max())) {
      where.fail("shape [{}] of {} overflows: its size exceeds 2^63 - 1 bytes", fmt::join(extents, ", "),
                 dtype.get_ref<const std::string&>());
    }
  }
  for (uint64_t extent : extents) entry.shape.push_back(int64_t(extent));
  const uint64_t nbytes = has_zero ? 0 : nonzero_bytes;

  const Json& offsets = required(where, info, "data_offsets");
  if (!offsets.is_array()) where.fail("\"data_offsets\" is {}, not an array [begin, end]", describe(offsets));
  if (offsets.size() != 2) where.fail("\"data_offsets\" has {} entries, expected 2", offsets.size());
  for (const Json& offset : offsets)
    if (!as_count(offset)) where.fail("\"data_offsets\" holds {}, not a non-negative integer", describe(offset));
  const uint64_t begin = *as_count(offsets[0]), end = *as_count(offsets[1]);
  if (begin > end) where.fail("data_offsets [{}, {}) end before they begin", begin, end);
  if (end > data_size) where.fail("data_offsets [{}, {}) outside the {} data bytes", begin, end, data_size);
  if (end - begin != nbytes)
    where.fail("data_offsets [{}, {}) hold {} bytes, but shape {} of {} needs {}", begin, end, end - begin,
               entry.shape.to_string(), dtype.get_ref<const std::string&>(), nbytes);
  entry.begin = size_t(begin);
  entry.end = size_t(end);
  return entry;
}

// The ranges, sorted as HF sorts them (by begin, then end), must tile [0, data_size): HF's reader
// refuses holes, overlaps and trailing bytes alike, so a file we accept opens there too.
void check_tiling(const std::string& path, const std::map<std::string, SafetensorsEntry>& entries,
                  size_t data_size) {
  using Item = std::pair<const std::string, SafetensorsEntry>;
  std::vector<const Item*> order;
  for (const Item& item : entries) order.push_back(&item);
  std::sort(order.begin(), order.end(), [](const Item* a, const Item* b) {
    return std::pair(a->second.begin, a->second.end) < std::pair(b->second.begin, b->second.end);
  });
  size_t covered = 0;
  const Item* last = nullptr;  // the last non-empty range, which ends at `covered`
  for (const Item* item : order) {
    const auto& [name, e] = *item;
    const Where where{path, name};
    if (e.begin > covered)
      where.fail("data_offsets [{}, {}) leave bytes [{}, {}) of the data section unused (the format allows no gaps)",
                 e.begin, e.end, covered, e.begin);
    if (e.begin < covered)
      where.fail("data_offsets [{}, {}) overlap tensor '{}' at [{}, {})", e.begin, e.end, last->first,
                 last->second.begin, last->second.end);
    if (e.end > e.begin) {
      covered = e.end;
      last = item;
    }
  }
  if (covered != data_size)
    throw IoError(path, fmt::format("the tensors cover bytes [0, {}) of the {}-byte data section: {} trailing bytes "
                                    "(the format allows none)",
                                    covered, data_size, data_size - covered));
}

// A bool holding any byte but 0 or 1 is not a value of the type, and reading it as one is undefined.
void check_bool_bytes(const Where& where, const SafetensorsEntry& entry, const std::byte* data_section) {
  for (size_t i = entry.begin; i < entry.end; ++i) {
    const auto byte = std::to_integer<unsigned>(data_section[i]);
    if (byte > 1) where.fail("BOOL element {} is the byte {}, not 0 or 1", i - entry.begin, byte);
  }
}

}  // namespace

SafetensorsLayout parse_safetensors(const std::string& path, std::span<const std::byte> file) {
  if (file.size() < 8) throw IoError(path, fmt::format("{} bytes: too short for a safetensors header", file.size()));
  uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  if (header_size > kMaxSafetensorsHeaderBytes)
    throw IoError(path, fmt::format("header length {} exceeds the cap of {} bytes", header_size,
                                    kMaxSafetensorsHeaderBytes));
  if (header_size > file.size() - 8)
    throw IoError(path, fmt::format("header length {} exceeds the file size {}", header_size, file.size()));

  SafetensorsLayout layout;
  layout.data_start = 8 + size_t(header_size);
  const auto* text = reinterpret_cast<const char*>(file.data()) + 8;
  const Json header = parse_header_json(path, text, text + header_size);
  const size_t data_size = file.size() - layout.data_start;
  const std::byte* data_section = file.data() + layout.data_start;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      layout.metadata = parse_metadata(path, info);
      continue;
    }
    layout.entries.emplace(name, parse_entry(Where{path, name}, info, data_size));
  }
  check_tiling(path, layout.entries, data_size);
  for (const auto& [name, entry] : layout.entries)
    if (entry.dtype == DType::boolean) check_bool_bytes(Where{path, name}, entry, data_section);
  return layout;
}

void copy_safetensors_entry(const std::string& path, const std::string& name, const SafetensorsEntry& entry,
                            const std::byte* data_section, TensorView dst) {
  RF_CHECK(dst.shape() == entry.shape, "{}: tensor '{}' has shape {}, the destination {}", path, name,
           entry.shape.to_string(), dst.shape().to_string());
  if (entry.dtype != dst.dtype() && !(is_floating(entry.dtype) && is_floating(dst.dtype())))
    throw IoError(path, fmt::format("tensor '{}' is stored as {} and cannot be read as {}", name,
                                    safetensors_dtype_name(entry.dtype), dtype_name(dst.dtype())));
  const std::byte* stored = data_section + entry.begin;
  const size_t nbytes = entry.end - entry.begin;
  if (nbytes == 0) return;
  if (entry.dtype == dst.dtype() && dst.is_contiguous()) {
    std::memcpy(dst.raw(), stored, nbytes);
    return;
  }
  // copy_convert loads typed elements, which needs aligned addresses; a file whose writer did not
  // pad the header (before safetensors 0.3) can misalign them, so such bytes are staged first.
  if (reinterpret_cast<uintptr_t>(stored) % dtype_size(entry.dtype) == 0) {
    copy_convert(TensorView(const_cast<std::byte*>(stored), entry.dtype, entry.shape), dst);
    return;
  }
  const Tensor staged(entry.shape, entry.dtype);
  std::memcpy(staged.view().raw(), stored, nbytes);
  copy_convert(staged, dst);
}

DType safetensors_dtype(std::string_view name) {
  const std::optional<DType> dtype = find_dtype(name);
  RF_CHECK(dtype, "unsupported safetensors dtype '{}': expected F32, BF16, F16, F64, I32, I64, U8 or BOOL", name);
  return *dtype;
}

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
  }
  return "F32";
}

}  // namespace rf::formats
