// Element types and the 16-bit float storage types (bf16, f16) with their conversions.
// bf16 <- f32 rounds to nearest even (as PyTorch and oneDNN do); NaN stays NaN.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace rf {

enum class DType : uint8_t { f32, bf16, f16, f64, i32, i64, u8, boolean };
inline constexpr int kNumDTypes = 8;

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16", "f64"/"float64", "i32", "i64",
// "u8", "bool"; throws rf::Error naming the text otherwise.
DType parse_dtype(std::string_view text);
bool is_floating(DType dtype);

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

inline float to_f32(bf16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

inline bf16 to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16{uint16_t(u >> 16)};
}

float to_f32(f16 x);
f16 to_f16(float x);

// Maps a C++ element type to its DType (used by TensorView::data<T>() to check the access).
template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::boolean; };

}  // namespace rf
