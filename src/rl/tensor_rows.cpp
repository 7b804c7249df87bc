#include "rl/tensor_rows.h"

#include <cstring>

#include "core/element_access.h"

namespace rf::rl {
namespace {

Shape with_rows(const Shape& shape, int64_t num_rows) {
  Shape out = shape;
  out[0] = num_rows;
  return out;
}

// Trailing dims (everything after the first) as a string for messages: "[*, 7]".
std::string row_shape(const Shape& shape) {
  std::string out = "[*";
  for (int d = 1; d < shape.rank(); ++d) out += ", " + std::to_string(shape[d]);
  return out + "]";
}

}  // namespace

Tensor gather_rows(TensorView src_B, std::span<const int64_t> rows, const std::string& what) {
  RF_CHECK(src_B.rank() >= 1, "{}: expected a tensor with a batch dim, got {}", what, src_B.describe());
  const int64_t num_rows = src_B.size(0);
  Tensor out(with_rows(src_B.shape(), int64_t(rows.size())), src_B.dtype());
  for (size_t i = 0; i < rows.size(); ++i) {
    RF_CHECK(rows[i] >= 0 && rows[i] < num_rows, "{}: sample index {} is outside [0, {})", what, rows[i], num_rows);
    copy_convert(src_B.slice(0, rows[i], 1), out.view().slice(0, int64_t(i), 1));
  }
  return out;
}

Tensor concat_rows(std::span<const TensorView> parts, const std::string& what) {
  RF_CHECK(!parts.empty(), "{}: nothing to concatenate", what);
  const TensorView first = parts[0];
  int64_t num_rows = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const TensorView part = parts[p];
    RF_CHECK(part.dtype() == first.dtype() && part.rank() == first.rank() && part.rank() >= 1 &&
                 with_rows(part.shape(), 0) == with_rows(first.shape(), 0),
             "{}: part {} is {} {}, part 0 is {} {}", what, p, dtype_name(part.dtype()), row_shape(part.shape()),
             dtype_name(first.dtype()), row_shape(first.shape()));
    num_rows += part.size(0);
  }
  Tensor out(with_rows(first.shape(), num_rows), first.dtype());
  int64_t offset = 0;
  for (const TensorView& part : parts) {
    copy_convert(part, out.view().slice(0, offset, part.size(0)));
    offset += part.size(0);
  }
  return out;
}

bool tensors_equal(TensorView a, TensorView b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  bool equal = true;
  const size_t size = a.element_size();
  const auto* bytes_a = static_cast<const std::byte*>(a.raw());
  const auto* bytes_b = static_cast<const std::byte*>(b.raw());
  for_each_offset(a.shape(), a.strides(), b.strides(), [&](int64_t i, int64_t j) {
    if (!equal) return;
    equal = is_floating(a.dtype()) ? load_f64(a, i) == load_f64(b, j)
                                   : std::memcmp(bytes_a + i * int64_t(size), bytes_b + j * int64_t(size), size) == 0;
  });
  return equal;
}

}  // namespace rf::rl
