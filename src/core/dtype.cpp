#include "core/dtype.h"

#include "core/error.h"

namespace rf {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::boolean: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  if (text == "f32" || text == "float32" || text == "float") return DType::f32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "f16" || text == "float16" || text == "half") return DType::f16;
  if (text == "f64" || text == "float64" || text == "double") return DType::f64;
  if (text == "i32" || text == "int32") return DType::i32;
  if (text == "i64" || text == "int64") return DType::i64;
  if (text == "u8" || text == "uint8") return DType::u8;
  if (text == "bool") return DType::boolean;
  RF_CHECK(false, "unknown dtype '{}': expected one of f32, bf16, f16, f64, i32, i64, u8, bool", text);
  return DType::f32;
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f64;
}

// IEEE half <-> single, exact for every half value; single -> half rounds to nearest even. Both
// agree bit for bit with the F16C instructions, NaN payloads included, so kernels that use F16C
// and code that uses these give identical bits.
float to_f32(f16 x) {
  const uint32_t sign = uint32_t(x.bits & 0x8000u) << 16;
  uint32_t exponent = (x.bits >> 10) & 0x1fu;
  uint32_t mantissa = x.bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {  // inf, or NaN: quieted, payload kept (as F16C's vcvtph2ps does)
    out = sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {  // subnormal half: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    out = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

f16 to_f16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};  // quiet, top payload bits
  if (abs >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                        // below the smallest normal half
    if (abs < 0x33000000u) return f16{sign};                      // rounds to zero
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // value = mantissa * 2^(e-150) = half * 2^-24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return f16{uint16_t(sign | half)};
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return f16{uint16_t(sign | ((rounded - 0x38000000u) >> 13))};
}

}  // namespace rf
