#include "core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/element_access.h"
#include "core/tensor_allocation.h"

namespace rf {
namespace {

constexpr size_t kAlignment = 64;

// Zeroes [data, data + bytes) and gives its whole pages back to the OS: MADV_DONTNEED on private
// anonymous memory (which the allocator's heap and its large-block mappings both are) drops the pages,
// and they read as zeros when next touched. The partial pages at the edges hold other allocations'
// bytes too, so they are zeroed in place instead.
void discard_contents(void* data, size_t bytes) {
  static const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + bytes;
  const uintptr_t first_page = (begin + page - 1) / page * page;
  const uintptr_t end_page = end / page * page;
  if (first_page >= end_page) {
    std::memset(data, 0, bytes);
    return;
  }
  std::memset(data, 0, first_page - begin);
  std::memset(reinterpret_cast<void*>(end_page), 0, end - end_page);
  // Should madvise refuse (locked pages), zeroing keeps the contract; only the RAM is not returned.
  if (madvise(reinterpret_cast<void*>(first_page), end_page - first_page, MADV_DONTNEED) != 0)
    std::memset(reinterpret_cast<void*>(first_page), 0, end_page - first_page);
}

}  // namespace

size_t tensor_allocation_bytes(const Shape& shape, DType dtype) {
  const size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  // Zero-sized tensors still get a buffer, so that `empty()` means "no tensor" and nothing else.
  return std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

Tensor::Tensor(Shape shape, DType dtype, TensorAccount account) : account_(account) {
  for (int64_t extent : shape) RF_CHECK(extent >= 0, "negative extent in shape {}", shape.to_string());
  const size_t padded = tensor_allocation_bytes(shape, dtype);
  if (account_.tracker) account_.tracker->on_allocate(account_.tier, account_.category, int64_t(padded));
  void* data = std::aligned_alloc(kAlignment, padded);
  if (!data) {
    if (account_.tracker) account_.tracker->on_release(account_.tier, account_.category, int64_t(padded));
    RF_CHECK(false, "out of memory allocating {} for a {} tensor of shape {}", format_bytes(int64_t(padded)),
             dtype_name(dtype), shape.to_string());
  }
  std::memset(data, 0, padded);
  view_ = TensorView(data, dtype, shape);
  allocated_bytes_ = padded;
}

Tensor::Tensor(Tensor&& other) noexcept
    : view_(other.view_), account_(other.account_), allocated_bytes_(other.allocated_bytes_),
      resident_(other.resident_) {
  other.view_ = TensorView();
  other.allocated_bytes_ = 0;
  other.resident_ = true;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    view_ = other.view_;
    account_ = other.account_;
    allocated_bytes_ = other.allocated_bytes_;
    resident_ = other.resident_;
    other.view_ = TensorView();
    other.allocated_bytes_ = 0;
    other.resident_ = true;
  }
  return *this;
}

Tensor::~Tensor() { release(); }

void Tensor::release() {
  if (view_.empty()) return;
  std::free(view_.raw());
  if (account_.tracker && resident_)
    account_.tracker->on_release(account_.tier, account_.category, int64_t(allocated_bytes_));
  view_ = TensorView();
  allocated_bytes_ = 0;
  resident_ = true;
}

void Tensor::set_resident(bool resident) {
  RF_CHECK(!view_.empty(), "set_resident: no tensor");
  if (resident == resident_) return;
  if (resident) {
    // Accounted first: a refused budget leaves the tensor as it was.
    if (account_.tracker) account_.tracker->on_allocate(account_.tier, account_.category, int64_t(allocated_bytes_));
  } else {
    discard_contents(view_.raw(), allocated_bytes_);
    if (account_.tracker) account_.tracker->on_release(account_.tier, account_.category, int64_t(allocated_bytes_));
  }
  resident_ = resident;
}

void copy_convert(TensorView src, TensorView dst) {
  RF_CHECK(src.shape() == dst.shape(), "copy_convert: shapes {} and {} differ", src.shape().to_string(),
           dst.shape().to_string());
  if (src.dtype() == dst.dtype()) {
    // Same dtype: copy bytes, so that i64 values beyond 2^53 and NaN payloads survive. Contiguous views
    // take one memcpy: element by element is ~20x slower on large buffers (the distributed optimizer's
    // gradient shard, 16M elements, took 130 ms).
    if (src.is_contiguous() && dst.is_contiguous()) {
      if (src.numel() > 0) std::memcpy(dst.raw(), src.raw(), src.nbytes());
      return;
    }
    const size_t size = src.element_size();
    const auto* from = static_cast<const std::byte*>(src.raw());
    auto* to = static_cast<std::byte*>(dst.raw());
    for_each_offset(src.shape(), src.strides(), dst.strides(), [&](int64_t s, int64_t d) {
      std::memcpy(to + d * int64_t(size), from + s * int64_t(size), size);
    });
    return;
  }
  for_each_offset(src.shape(), src.strides(), dst.strides(), [&](int64_t s, int64_t d) {
    store_f64(dst, d, load_f64(src, s));
  });
}

void fill_zero(TensorView dst) {
  if (dst.is_contiguous()) {
    std::memset(dst.raw(), 0, dst.nbytes());
    return;
  }
  for_each_offset(dst.shape(), dst.strides(), dst.strides(), [&](int64_t, int64_t d) { store_f64(dst, d, 0.0); });
}

Tensor clone(TensorView src, DType dtype, TensorAccount account) {
  Tensor out(src.shape(), dtype, account);
  copy_convert(src, out);
  return out;
}

}  // namespace rf
