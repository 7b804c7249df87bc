// Gradient-norm tests: sum_squares of every variant against a plain loop (f32, bf16, f64 on the
// ref; contiguous, transposed, sliced, empty views), bitwise independence of the thread count (and
// of the cpu variant), scale bitwise against the ref with sentinels, and clip_coefficient.
#include <omp.h>

#include <cmath>

#include "core/element_access.h"
#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_tensor;

// Sum of squares in row-major order, the index decomposed by hand.
double plain_sum_squares(const TensorView& x) {
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t offset = 0, rest = i;
    for (int d = x.rank() - 1; d >= 0; --d) {
      offset += (rest % x.size(d)) * x.stride(d);
      rest /= x.size(d);
    }
    const double value = load_f64(x, offset);
    sum += value * value;
  }
  return sum;
}

// Views of one buffer of `dtype`: contiguous, 2-D transposed, a column slice, 3-D with a size-1
// dim and a stride, a scalar, and empty.
struct ViewCase {
  std::string name;
  TensorView view;
};
std::vector<ViewCase> views_of(const Tensor& buffer) {
  const TensorView flat = buffer.view().slice(0, 0, 1073);
  const TensorView matrix = buffer.view().slice(0, 0, 37 * 29).reshape({37, 29});
  const TensorView cube = buffer.view().slice(0, 0, 5 * 1 * 41).reshape({5, 1, 41});
  return {{"contiguous [1073]", flat},
          {"transposed [29, 37]", matrix.transpose(0, 1)},
          {"columns 5..20 of [37, 29]", matrix.slice(1, 5, 15)},
          {"every other column of [5, 1, 41]", TensorView(cube.raw(), cube.dtype(), {5, 1, 20}, {41, 41, 2})},
          {"scalar", TensorView(buffer.view().raw(), buffer.dtype(), Shape{})},
          {"empty [0, 7]", TensorView(buffer.view().raw(), buffer.dtype(), {0, 7})}};
}

TEST(GradNormKernels, SumSquaresMatchesPlainLoop) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    const Tensor buffer = random_tensor({2048}, dtype, 51, -3, 3);
    std::vector<const KernelTable*> tables = dtype == DType::f64 ? std::vector<const KernelTable*>{} : fast_tables();
    tables.insert(tables.begin(), &ref::table());
    for (const ViewCase& c : views_of(buffer)) {
      const double expected = plain_sum_squares(c.view);
      for (const KernelTable* table : tables)
        EXPECT_NEAR(table->sum_squares(c.view), expected, 1e-13 * expected)
            << kernel_variant_name(table->variant) << " " << dtype_name(dtype) << " " << c.name;
    }
  }
}

// Fixed blocks and a fixed reduction order: the same bits on 1, 2 or 3 threads, and on every cpu
// variant (f32 squares are exact in f64, so only the fixed-order additions round).
TEST(GradNormCpu, SumSquaresIndependentOfThreadCountAndVariant) {
  constexpr int64_t kRows = 613, kCols = 499;  // above the parallel threshold
  Tensor x = random_tensor({kRows, kCols}, DType::f32, 52);
  for (int64_t i = 0; i < x.numel(); i += 7) x.data<float>()[i] *= 1e4f;  // spread the magnitudes
  const int saved_threads = omp_get_max_threads();
  for (const TensorView& view : {x.view(), x.view().transpose(0, 1), x.view().slice(1, 3, 401)}) {
    std::vector<double> sums;
    for (const KernelTable* table : fast_tables()) {
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        sums.push_back(table->sum_squares(view));
      }
    }
    omp_set_num_threads(saved_threads);
    for (double sum : sums) EXPECT_EQ(sum, sums.front()) << view.describe();
    EXPECT_NEAR(sums.front(), plain_sum_squares(view), 1e-13 * sums.front()) << view.describe();
  }
  omp_set_num_threads(saved_threads);
}

TEST(GradNormCpu, ScaleMatchesRefBitwise) {
  constexpr double kFactor = 0.3712;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = random_tensor({70, 1031}, dtype, 53, -2, 2);  // above the parallel threshold
    const Tensor expected = clone(x, dtype);
    ref::scale(expected, kFactor);
    for (int64_t i = 0; i < x.numel(); ++i) {  // the factor is applied as an f32 multiply
      const float product = float(load_f64(x, i)) * float(kFactor);
      ASSERT_EQ(load_f64(expected, i), dtype == DType::f32 ? product : to_f32(to_bf16(product))) << i;
    }
    for (const KernelTable* table : fast_tables()) {
      const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), dtype_name(dtype));
      const GuardedTensor strided = guarded_copy(x, Layout::strided);
      table->scale(strided, kFactor);
      testing::expect_close(strided, expected, 0, 0, what + " strided");
      strided.expect_sentinels_intact(what + " strided");
      const GuardedTensor transposed = guarded_copy(x, Layout::contiguous);
      table->scale(transposed.view().transpose(0, 1), kFactor);
      testing::expect_close(transposed, expected, 0, 0, what + " transposed");
      transposed.expect_sentinels_intact(what + " transposed");
    }
  }
  const Tensor x64 = random_tensor({9}, DType::f64, 54);
  const Tensor scaled64 = clone(x64, DType::f64);
  ref::scale(scaled64, kFactor);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(scaled64.data<double>()[i], x64.data<double>()[i] * kFactor);
}

// torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1; scaling every
// gradient by it brings the global norm down to max_norm.
TEST(GradNormKernels, ClipCoefficientScalesTheGlobalNormToMaxNorm) {
  EXPECT_EQ(clip_coefficient(10.0, 1.0), 1.0 / (10.0 + 1e-6));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0);
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.0);  // the 1e-6 makes a norm equal to max_norm clip slightly

  for (const KernelTable* table : fast_tables()) {
    const Tensor a = random_tensor({300}, DType::f32, 55, -5, 5);
    const Tensor b = random_tensor({17, 13}, DType::bf16, 56, -5, 5);
    const double norm = std::sqrt(table->sum_squares(a) + table->sum_squares(b));
    constexpr double kMaxNorm = 2.0;
    const double coefficient = clip_coefficient(norm, kMaxNorm);
    ASSERT_LT(coefficient, 1.0);
    table->scale(a, coefficient);
    table->scale(b, coefficient);
    const double clipped = std::sqrt(table->sum_squares(a) + table->sum_squares(b));
    // bf16 rounding of b's elements moves the norm by up to ~2^-9 relative.
    EXPECT_NEAR(clipped, kMaxNorm, 4e-3 * kMaxNorm) << kernel_variant_name(table->variant);
  }
}

TEST(GradNormKernels, RejectUnsupportedDtypes) {
  const Tensor ids({4}, DType::i32);
  EXPECT_THROW(ref::sum_squares(ids), Error);
  EXPECT_THROW(ref::scale(ids, 2.0), Error);
  const Tensor f64({4}, DType::f64);
  for (const KernelTable* table : fast_tables()) {
    EXPECT_THROW(table->sum_squares(f64), Error) << kernel_variant_name(table->variant);
    EXPECT_THROW(table->scale(ids, 2.0), Error) << kernel_variant_name(table->variant);
  }
}

}  // namespace
}  // namespace rf::kernels
