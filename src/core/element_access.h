// Slow, dtype-generic element access for setup code, tests and ref kernels: read or write one
// element of any dtype as a double, and visit every element of a strided shape. Not for hot loops.
#pragma once

#include "core/tensor_view.h"

namespace rf {

inline double load_f64(const TensorView& view, int64_t offset) {
  void* p = view.raw();
  switch (view.dtype()) {
    case DType::f32: return static_cast<float*>(p)[offset];
    case DType::bf16: return to_f32(static_cast<bf16*>(p)[offset]);
    case DType::f16: return to_f32(static_cast<f16*>(p)[offset]);
    case DType::f64: return static_cast<double*>(p)[offset];
    case DType::i32: return static_cast<int32_t*>(p)[offset];
    case DType::i64: return double(static_cast<int64_t*>(p)[offset]);
    case DType::u8: return static_cast<uint8_t*>(p)[offset];
    case DType::boolean: return static_cast<bool*>(p)[offset] ? 1.0 : 0.0;
  }
  return 0.0;
}

// Rounds to the destination dtype (nearest even for floats, truncation toward zero for ints).
inline void store_f64(const TensorView& view, int64_t offset, double value) {
  void* p = view.raw();
  switch (view.dtype()) {
    case DType::f32: static_cast<float*>(p)[offset] = float(value); break;
    case DType::bf16: static_cast<bf16*>(p)[offset] = to_bf16(float(value)); break;
    case DType::f16: static_cast<f16*>(p)[offset] = to_f16(float(value)); break;
    case DType::f64: static_cast<double*>(p)[offset] = value; break;
    case DType::i32: static_cast<int32_t*>(p)[offset] = int32_t(value); break;
    case DType::i64: static_cast<int64_t*>(p)[offset] = int64_t(value); break;
    case DType::u8: static_cast<uint8_t*>(p)[offset] = uint8_t(value); break;
    case DType::boolean: static_cast<bool*>(p)[offset] = value != 0.0; break;
  }
}

// Calls fn(offset_a, offset_b) for every index of `shape`, in row-major order, where the offsets
// are that index under strides_a and strides_b.
template <class Fn>
void for_each_offset(const Shape& shape, const Shape& strides_a, const Shape& strides_b, Fn&& fn) {
  const int rank = shape.rank();
  if (shape.numel() == 0) return;
  Shape index = shape;
  for (int d = 0; d < rank; ++d) index[d] = 0;
  int64_t a = 0, b = 0;
  while (true) {
    fn(a, b);
    int d = rank - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        a += strides_a[d];
        b += strides_b[d];
        break;
      }
      a -= strides_a[d] * (shape[d] - 1);
      b -= strides_b[d] * (shape[d] - 1);
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace rf
