// TensorView: a non-owning, typed, strided window onto memory (row-major by default).
// Views never own and never allocate; slicing and transposing only change shape and strides.
// Strides are in elements. Kernels that need a unit inner stride check `inner_contiguous()`.
#pragma once

#include <cstddef>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace rf {

class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, DType dtype, Shape shape);  // contiguous
  TensorView(void* data, DType dtype, Shape shape, Shape strides);

  DType dtype() const { return dtype_; }
  int rank() const { return shape_.rank(); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  // Negative dims count from the end, as in Python.
  int64_t size(int dim) const { return shape_[normalize_dim(dim)]; }
  int64_t stride(int dim) const { return strides_[normalize_dim(dim)]; }
  int64_t numel() const { return shape_.numel(); }
  bool empty() const { return data_ == nullptr; }
  bool is_contiguous() const;
  bool inner_contiguous() const { return rank() == 0 || strides_[rank() - 1] == 1; }
  size_t element_size() const { return dtype_size(dtype_); }
  // Bytes spanned by a contiguous view.
  size_t nbytes() const { return size_t(numel()) * element_size(); }

  void* raw() const { return data_; }
  template <class T>
  T* data() const {
    RF_CHECK(DTypeOf<T>::value == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_),
             dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(data_);
  }
  // Element access for tests and setup code (checks bounds); kernels use data<T>() and strides.
  template <class T>
  T& at(std::initializer_list<int64_t> index) const {
    return data<T>()[offset_of(index)];
  }

  TensorView slice(int dim, int64_t start, int64_t length) const;
  TensorView select(int dim, int64_t index) const;  // drops `dim`
  TensorView reshape(Shape shape) const;            // contiguous views only
  TensorView transpose(int dim_a, int dim_b) const;

  std::string describe() const;  // "f32[2, 3] strides [3, 1]"

 private:
  int normalize_dim(int dim) const;
  int64_t offset_of(std::initializer_list<int64_t> index) const;

  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
};

// Throws unless `view` has exactly `expected` extents; `what` names the tensor in the message.
void check_shape(const TensorView& view, const Shape& expected, const char* what);
void check_dtype(const TensorView& view, DType expected, const char* what);

}  // namespace rf
