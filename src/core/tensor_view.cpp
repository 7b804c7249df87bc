#include "core/tensor_view.h"

#include <utility>

namespace rf {

TensorView::TensorView(void* data, DType dtype, Shape shape)
    : data_(data), dtype_(dtype), shape_(shape), strides_(contiguous_strides(shape)) {}

TensorView::TensorView(void* data, DType dtype, Shape shape, Shape strides)
    : data_(data), dtype_(dtype), shape_(shape), strides_(strides) {
  RF_CHECK(shape.rank() == strides.rank(), "shape {} and strides {} differ in rank",
           shape.to_string(), strides.to_string());
}

int TensorView::normalize_dim(int dim) const {
  const int d = dim < 0 ? dim + rank() : dim;
  RF_CHECK(d >= 0 && d < rank(), "dim {} out of range for a rank-{} tensor", dim, rank());
  return d;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

int64_t TensorView::offset_of(std::initializer_list<int64_t> index) const {
  RF_CHECK(int(index.size()) == rank(), "index of rank {} into a rank-{} tensor", index.size(),
           rank());
  int64_t offset = 0;
  int d = 0;
  for (int64_t i : index) {
    RF_CHECK(i >= 0 && i < shape_[d], "index {} out of range [0, {}) in dim {}", i, shape_[d], d);
    offset += i * strides_[d++];
  }
  return offset;
}

TensorView TensorView::slice(int dim, int64_t start, int64_t length) const {
  const int d = normalize_dim(dim);
  RF_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d],
           "slice [{}, {}) out of range [0, {}) in dim {}", start, start + length, shape_[d], d);
  TensorView out = *this;
  out.data_ = static_cast<std::byte*>(data_) + start * strides_[d] * int64_t(element_size());
  out.shape_[d] = length;
  return out;
}

TensorView TensorView::select(int dim, int64_t index) const {
  const int d = normalize_dim(dim);
  TensorView one = slice(d, index, 1);
  Shape shape, strides;
  for (int i = 0; i < rank(); ++i) {
    if (i == d) continue;
    shape.push_back(shape_[i]);
    strides.push_back(strides_[i]);
  }
  return TensorView(one.data_, dtype_, shape, strides);
}

TensorView TensorView::reshape(Shape shape) const {
  RF_CHECK(is_contiguous(), "reshape of a non-contiguous view {}", describe());
  RF_CHECK(shape.numel() == numel(), "reshape {} -> {} changes the element count",
           shape_.to_string(), shape.to_string());
  return TensorView(data_, dtype_, shape);
}

TensorView TensorView::transpose(int dim_a, int dim_b) const {
  const int a = normalize_dim(dim_a), b = normalize_dim(dim_b);
  TensorView out = *this;
  std::swap(out.shape_[a], out.shape_[b]);
  std::swap(out.strides_[a], out.strides_[b]);
  return out;
}

std::string TensorView::describe() const {
  return fmt::format("{}{} strides {}", dtype_name(dtype_), shape_.to_string(),
                     strides_.to_string());
}

void check_shape(const TensorView& view, const Shape& expected, const char* what) {
  RF_CHECK(view.shape() == expected, "{}: expected shape {}, got {}", what, expected.to_string(),
           view.shape().to_string());
}

void check_dtype(const TensorView& view, DType expected, const char* what) {
  RF_CHECK(view.dtype() == expected, "{}: expected dtype {}, got {}", what, dtype_name(expected),
           dtype_name(view.dtype()));
}

}  // namespace rf
