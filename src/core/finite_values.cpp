#include "core/finite_values.h"

#include <cmath>

#include "core/element_access.h"

namespace rf {
namespace {

// A floating value is NaN or Inf exactly when its exponent bits are all ones, so a contiguous tensor is
// checked on its bit patterns: no conversion, and an OR over the flags vectorises.
template <class Bits>
bool contiguous_all_finite(const void* data, int64_t n, Bits exponent_mask) {
  const auto* bits = static_cast<const Bits*>(data);
  Bits bad = 0;
#pragma omp parallel for reduction(| : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad |= Bits((bits[i] & exponent_mask) == exponent_mask);
  return bad == 0;
}

}  // namespace

bool all_finite(TensorView x) {
  if (x.empty() || !is_floating(x.dtype())) return true;
  if (!x.is_contiguous()) return !first_non_finite(x).has_value();
  switch (x.dtype()) {
    case DType::f32: return contiguous_all_finite<uint32_t>(x.raw(), x.numel(), 0x7f800000u);
    case DType::f64: return contiguous_all_finite<uint64_t>(x.raw(), x.numel(), 0x7ff0000000000000ull);
    case DType::bf16: return contiguous_all_finite<uint16_t>(x.raw(), x.numel(), uint16_t(0x7f80));
    case DType::f16: return contiguous_all_finite<uint16_t>(x.raw(), x.numel(), uint16_t(0x7c00));
    default: return true;
  }
}

std::optional<int64_t> first_non_finite(TensorView x) {
  if (x.empty() || !is_floating(x.dtype()) || (x.is_contiguous() && all_finite(x))) return std::nullopt;
  std::optional<int64_t> first;
  int64_t index = 0;
  const Shape& strides = x.strides();
  for_each_offset(x.shape(), strides, strides, [&](int64_t offset, int64_t) {
    if (!first && !std::isfinite(load_f64(x, offset))) first = index;
    ++index;
  });
  return first;
}

}  // namespace rf
