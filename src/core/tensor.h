// Tensor: owns a 64-byte-aligned, contiguous buffer and, when given a MemoryTracker, accounts its
// bytes under a (tier, category) for its whole life. Move-only. Converts to TensorView, which is
// what every kernel takes.
#pragma once

#include <memory>

#include "core/memory_tracker.h"
#include "core/tensor_view.h"

namespace rf {

struct TensorAccount {
  MemoryTracker* tracker = nullptr;  // nullptr: not accounted (tests, small scratch)
  MemoryTier tier = MemoryTier::device;
  MemoryCategory category = MemoryCategory::workspace;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled: uninitialised tensors are a class of bug we do not want.
  Tensor(Shape shape, DType dtype, TensorAccount account = {});
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor();

  TensorView view() const { return view_; }
  operator TensorView() const { return view_; }  // NOLINT: a Tensor is usable wherever a view is

  DType dtype() const { return view_.dtype(); }
  const Shape& shape() const { return view_.shape(); }
  int64_t size(int dim) const { return view_.size(dim); }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }
  bool empty() const { return view_.empty(); }
  template <class T>
  T* data() const {
    return view_.data<T>();
  }
  template <class T>
  T& at(std::initializer_list<int64_t> index) const {
    return view_.at<T>(index);
  }

 private:
  void release();

  TensorView view_;
  TensorAccount account_;
  size_t allocated_bytes_ = 0;
};

// Copies `src` into `dst` (same shape, any strides), converting between floating dtypes.
void copy_convert(TensorView src, TensorView dst);
void fill_zero(TensorView dst);
Tensor clone(TensorView src, DType dtype, TensorAccount account = {});

}  // namespace rf
