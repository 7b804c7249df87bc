#include "formats/safetensors_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace rf::formats {

DType safetensors_dtype(const std::string& name) {
  if (name == "F32") return DType::f32;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  if (name == "F64") return DType::f64;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  if (name == "U8") return DType::u8;
  if (name == "BOOL") return DType::boolean;
  RF_CHECK(false, "unsupported safetensors dtype '{}': expected F32, BF16, F16, F64, I32, I64, U8 or BOOL", name);
  return DType::f32;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) {
  if (file_.size() < 8) throw IoError(path, fmt::format("{} bytes: too short for a safetensors header", file_.size()));
  uint64_t header_size = 0;
  std::memcpy(&header_size, file_.data(), 8);
  if (header_size > file_.size() - 8)
    throw IoError(path, fmt::format("header length {} exceeds the file size {}", header_size, file_.size()));
  data_start_ = 8 + size_t(header_size);
  const auto* begin = reinterpret_cast<const char*>(file_.data()) + 8;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, begin + header_size);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) throw IoError(path, "header is not a JSON object");
  const size_t data_size = file_.size() - data_start_;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      SafetensorsEntry e;
      e.dtype = safetensors_dtype(info.at("dtype").get<std::string>());
      for (const auto& d : info.at("shape")) {
        const int64_t extent = d.get<int64_t>();
        RF_CHECK(extent >= 0, "negative extent {}", extent);
        e.shape.push_back(extent);
      }
      const auto& offsets = info.at("data_offsets");
      RF_CHECK(offsets.size() == 2, "data_offsets has {} entries, expected 2", offsets.size());
      e.begin = offsets[0].get<size_t>();
      e.end = offsets[1].get<size_t>();
      RF_CHECK(e.begin <= e.end && e.end <= data_size, "data_offsets [{}, {}) outside the {} data bytes", e.begin,
               e.end, data_size);
      // The extents are untrusted: a product that wraps around could match the byte count.
      size_t expected = dtype_size(e.dtype);
      bool overflow = false;
      for (int64_t extent : e.shape) overflow |= __builtin_mul_overflow(expected, size_t(extent), &expected);
      RF_CHECK(!overflow || std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end(),
               "shape {} of {} does not fit in memory", e.shape.to_string(), dtype_name(e.dtype));
      RF_CHECK(e.end - e.begin == expected, "{} bytes for shape {} of {} (expected {})", e.end - e.begin,
               e.shape.to_string(), dtype_name(e.dtype), expected);
      entries_.emplace(name, e);
    } catch (const nlohmann::json::exception& ex) {
      throw IoError(path, fmt::format("tensor '{}': malformed entry: {}", name, ex.what()));
    } catch (const IoError&) {
      throw;
    } catch (const Error& ex) {
      throw IoError(path, fmt::format("tensor '{}': {}", name, ex.what()));
    }
  }
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw IoError(path(), fmt::format("no tensor named '{}'", name));
  return it->second;
}

TensorView SafetensorsReader::view(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  auto* data = const_cast<std::byte*>(file_.data() + data_start_ + e.begin);
  return TensorView(data, e.dtype, e.shape);
}

Tensor SafetensorsReader::read(const std::string& name, DType dtype, TensorAccount account) const {
  return clone(view(name), dtype, account);
}

}  // namespace rf::formats
