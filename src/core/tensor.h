// Tensor: owns a 64-byte-aligned, contiguous buffer and, when given a MemoryTracker, accounts its
// bytes under a (tier, category) for as long as it is resident (normally its whole life; offload
// makes it non-resident for a while, core/offload.h). Move-only. Converts to TensorView, which is
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
  const TensorAccount& account() const { return account_; }
  size_t allocated_bytes() const { return allocated_bytes_; }  // what the tracker counts: nbytes, padded

  // Residency, for offload (core/offload.h keeps the contents elsewhere meanwhile). The buffer keeps its
  // address either way, so views taken before stay valid, although they must not be used while the
  // tensor is not resident.
  // set_resident(false): the tracker releases allocated_bytes() from the tensor's (tier, category) and
  // the contents are lost: the buffer reads as zeros. The whole pages inside the buffer go back to the
  // OS (madvise MADV_DONTNEED); the partial pages at its two edges, which other allocations share, stay
  // and are zeroed: under two pages per tensor stay in RAM, while the tracker releases every byte.
  // set_resident(true): the bytes are accounted again; when the tier's budget refuses them the
  // tracker's error propagates and the tensor stays non-resident. The contents are zeros: the caller
  // copies its data back. Either call is a no-op when the tensor already is what it asks for.
  void set_resident(bool resident);
  bool resident() const { return resident_; }

 private:
  void release();

  TensorView view_;
  TensorAccount account_;
  size_t allocated_bytes_ = 0;
  bool resident_ = true;
};

// Copies `src` into `dst` (same shape, any strides), converting between floating dtypes.
void copy_convert(TensorView src, TensorView dst);
void fill_zero(TensorView dst);
Tensor clone(TensorView src, DType dtype, TensorAccount account = {});

}  // namespace rf
