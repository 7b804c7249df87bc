// Fast pieces of gradient-norm clipping over f32 and bf16 tensors of any strides: the sum of
// squares in f64 and the in-place scale.
// The sum is the same number whatever the thread count (and the instruction set): the elements,
// in row-major order, are cut into kNumBlocks fixed ranges; within a range, element i goes to
// accumulator lane i % kLanes of its row segment; lanes, then blocks, are added in a fixed order.
// Squares of f32 values are exact in f64, so only those fixed-order additions round.
#include <algorithm>
#include <array>
#include <bit>

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int kNumBlocks = 64;
constexpr int kLanes = 16;
// Below this many elements the threads cost more than they save (the blocks stay the same).
constexpr int64_t kParallelMin = 1 << 16;

inline float to_float(float x) { return x; }
inline float to_float(bf16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

// The view with size-1 dims dropped and dims that step through memory as one merged, so that a
// contiguous tensor (or a slice of whole rows) is a single run.
struct FlatLayout {
  int rank = 0;
  std::array<int64_t, kMaxDims> extent{};
  std::array<int64_t, kMaxDims> stride{};

  explicit FlatLayout(const TensorView& x) {
    for (int d = 0; d < x.rank(); ++d) {
      if (x.size(d) == 1) continue;
      if (rank > 0 && stride[rank - 1] == x.stride(d) * x.size(d)) {
        extent[rank - 1] *= x.size(d);
        stride[rank - 1] = x.stride(d);
      } else {
        extent[rank] = x.size(d);
        stride[rank] = x.stride(d);
        ++rank;
      }
    }
    if (rank == 0) {  // a scalar, or every extent 1
      extent[0] = 1;
      stride[0] = 1;
      rank = 1;
    }
  }
  int64_t inner() const { return extent[rank - 1]; }
  int64_t inner_stride() const { return stride[rank - 1]; }
  int64_t row_offset(int64_t row) const {
    int64_t offset = 0;
    for (int d = rank - 2; d >= 0; --d) {
      offset += (row % extent[d]) * stride[d];
      row /= extent[d];
    }
    return offset;
  }
};

// Calls fn(offset, length) for the runs along the inner dim that cover the row-major elements
// [begin, end) of the view.
template <class Fn>
void for_each_run(const FlatLayout& layout, int64_t begin, int64_t end, Fn&& fn) {
  const int64_t inner = layout.inner();
  for (int64_t i = begin; i < end;) {
    const int64_t row = i / inner, col = i % inner;
    const int64_t length = std::min(inner - col, end - i);
    fn(layout.row_offset(row) + col * layout.inner_stride(), length);
    i += length;
  }
}

int64_t block_begin(int64_t count, int block) { return count * block / kNumBlocks; }

template <class T>
void accumulate_squares(const T* x, int64_t stride, int64_t length, std::array<double, kLanes>& lanes) {
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      const double value = to_float(x[(i + j) * stride]);
      lanes[size_t(j)] += value * value;
    }
  }
  for (int j = 0; i + j < length; ++j) {
    const double value = to_float(x[(i + j) * stride]);
    lanes[size_t(j)] += value * value;
  }
}

template <class T>
double sum_squares_of(const T* data, const FlatLayout& layout, int64_t count) {
  std::array<double, kNumBlocks> block_sums{};
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
  for (int block = 0; block < kNumBlocks; ++block) {
    std::array<double, kLanes> lanes{};
    for_each_run(layout, block_begin(count, block), block_begin(count, block + 1), [&](int64_t offset, int64_t length) {
      if (layout.inner_stride() == 1)
        accumulate_squares(data + offset, 1, length, lanes);
      else
        accumulate_squares(data + offset, layout.inner_stride(), length, lanes);
    });
    double sum = 0;
    for (double lane : lanes) sum += lane;
    block_sums[size_t(block)] = sum;
  }
  double total = 0;
  for (double sum : block_sums) total += sum;
  return total;
}

inline void scale_value(float& x, float factor) { x *= factor; }
// Same rounding as rf::to_bf16 (nearest even, NaN stays NaN), branch-free so the loop vectorises.
inline void scale_value(bf16& x, float factor) {
  const uint32_t u = std::bit_cast<uint32_t>(to_float(x) * factor);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  x.bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

template <class T>
void scale_of(T* data, const FlatLayout& layout, int64_t count, float factor) {
  const int64_t stride = layout.inner_stride();
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
  for (int block = 0; block < kNumBlocks; ++block) {
    for_each_run(layout, block_begin(count, block), block_begin(count, block + 1), [&](int64_t offset, int64_t length) {
      T* x = data + offset;
      if (stride == 1) {
#pragma omp simd
        for (int64_t i = 0; i < length; ++i) scale_value(x[i], factor);
      } else {
        for (int64_t i = 0; i < length; ++i) scale_value(x[i * stride], factor);
      }
    });
  }
}

void check_dtype_supported(TensorView x, const char* op) {
  RF_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "{}: the cpu kernel takes f32 or bf16, got {}", op,
           dtype_name(x.dtype()));
}

}  // namespace

double sum_squares(TensorView x) {
  check_dtype_supported(x, "sum_squares");
  const int64_t count = x.numel();
  if (count == 0) return 0.0;
  const FlatLayout layout(x);
  return x.dtype() == DType::f32 ? sum_squares_of(x.data<float>(), layout, count)
                                 : sum_squares_of(x.data<bf16>(), layout, count);
}

// f32 (and bf16, through f32) multiply by float(factor), as ref::scale.
void scale(TensorView x, double factor) {
  check_dtype_supported(x, "scale");
  const int64_t count = x.numel();
  if (count == 0) return;
  const FlatLayout layout(x);
  if (x.dtype() == DType::f32)
    scale_of(x.data<float>(), layout, count, float(factor));
  else
    scale_of(x.data<bf16>(), layout, count, float(factor));
}

}  // namespace rf::kernels::RF_CPU_NS
