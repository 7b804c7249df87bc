// RMSNorm tests: every cpu variant against the ref (f32 and bf16, awkward shapes, strided views with
// sentinels, both dx modes and dw +=), dw independent of the thread count, HF's bf16 rounding
// point, finite differences of the f64 ref backward, and argument errors.
// Legend: N rows, C normalised dim.
#include <omp.h>

#include <cstring>

#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::expect_close;
using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_tensor;

constexpr RmsNormParams kParams{.eps = 1e-6};

struct Tolerance {
  double rtol, atol;
};

struct RmsNormCase {
  int64_t N, C;
  DType dtype;
  Layout layout;
  Accumulate mode;
};

void check_against_ref(const RmsNormCase& k) {
  const std::string name = fmt::format("N={} C={} {} {} {}", k.N, k.C, dtype_name(k.dtype),
                                       k.layout == Layout::strided ? "strided" : "contiguous",
                                       k.mode == Accumulate::add ? "add" : "overwrite");
  const Tensor x = random_tensor({k.N, k.C}, k.dtype, 1, -2.0, 2.0);
  const Tensor w = random_tensor({k.C}, k.dtype, 2, -1.5, 1.5);
  const Tensor dy = random_tensor({k.N, k.C}, k.dtype, 3);
  const Tensor dx_before = random_tensor({k.N, k.C}, k.dtype, 4);
  const Tensor dw_before = random_tensor({k.C}, DType::f32, 5);

  const Tensor y_ref({k.N, k.C}, k.dtype), rstd_ref({k.N}, DType::f32);
  RmsNormSaved saved_ref{rstd_ref};
  ref::rmsnorm_forward(kParams, x, w, y_ref, saved_ref);
  const Tensor dx_ref = clone(dx_before, k.dtype), dw_ref = clone(dw_before, DType::f32);
  ref::rmsnorm_backward(kParams, dy, x, w, saved_ref, dx_ref, dw_ref, k.mode);

  // bf16 outputs carry 8 significant bits: the ref (f64) and the cpu (f32) may round the
  // normalised x and then y to neighbouring bf16 values, two ulps of 2^-8 at most. rstd and dw are
  // f32 in both cases, computed from the same inputs; dw sums N products of size <= ~3 in f32.
  const bool bf16 = k.dtype == DType::bf16;
  const Tolerance y_tol = bf16 ? Tolerance{1e-2, 1e-5} : Tolerance{1e-5, 1e-6};
  const Tolerance dx_tol = bf16 ? Tolerance{1e-2, 1e-5} : Tolerance{1e-5, 1e-5};
  const Tolerance dw_tol{1e-5, 4e-7 * double(k.N)};

  for (const KernelTable* table : fast_tables()) {
    const std::string what = fmt::format("{} {}", kernel_variant_name(table->variant), name);
    const GuardedTensor x_g = guarded_copy(x, k.layout);
    const GuardedTensor w_g = guarded_copy(w, Layout::contiguous);
    const GuardedTensor y_g({k.N, k.C}, k.dtype, k.layout);
    const GuardedTensor rstd_g({k.N}, DType::f32, Layout::contiguous);
    RmsNormSaved saved{rstd_g};
    table->rmsnorm_forward(kParams, x_g, w_g, y_g, saved);
    expect_close(y_g, y_ref, y_tol.rtol, y_tol.atol, what + " y");
    expect_close(rstd_g, rstd_ref, 1e-6, 0, what + " rstd");
    y_g.expect_sentinels_intact(what + " y");
    rstd_g.expect_sentinels_intact(what + " rstd");

    // Backward reads the ref's rstd so that only the backward arithmetic is compared.
    const GuardedTensor dy_g = guarded_copy(dy, k.layout);
    const GuardedTensor rstd_in = guarded_copy(rstd_ref, Layout::contiguous);
    const GuardedTensor dx_g = guarded_copy(dx_before, k.layout);
    const GuardedTensor dw_g = guarded_copy(dw_before, Layout::contiguous);
    table->rmsnorm_backward(kParams, dy_g, x_g, w_g, RmsNormSaved{rstd_in}, dx_g, dw_g, k.mode);
    expect_close(dx_g, dx_ref, dx_tol.rtol, dx_tol.atol, what + " dx");
    expect_close(dw_g, dw_ref, dw_tol.rtol, dw_tol.atol, what + " dw");
    dx_g.expect_sentinels_intact(what + " dx");
    dw_g.expect_sentinels_intact(what + " dw");
  }
}

TEST(RmsNorm, CpuMatchesRef) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_against_ref({1, 7, dtype, Layout::contiguous, Accumulate::overwrite});
    check_against_ref({1, 7, dtype, Layout::strided, Accumulate::add});
    check_against_ref({3, 13, dtype, Layout::strided, Accumulate::overwrite});
    check_against_ref({5, 37, dtype, Layout::strided, Accumulate::add});
    check_against_ref({67, 64, dtype, Layout::contiguous, Accumulate::add});
    check_against_ref({300, 70, dtype, Layout::strided, Accumulate::overwrite});  // multi-threaded
  }
}

// The same dw and dx, bit for bit, whatever the number of threads.
TEST(RmsNorm, CpuBackwardIsIndependentOfThreadCount) {
  const int64_t N = 301, C = 70;
  const Tensor x = random_tensor({N, C}, DType::f32, 11);
  const Tensor w = random_tensor({C}, DType::f32, 12);
  const Tensor dy = random_tensor({N, C}, DType::f32, 13);
  const Tensor rstd({N}, DType::f32);
  RmsNormSaved saved{rstd};
  ref::rmsnorm_forward(kParams, x, w, Tensor({N, C}, DType::f32), saved);
  const int threads_before = omp_get_max_threads();
  for (const KernelTable* table : fast_tables()) {
    std::vector<Tensor> dx, dw;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      dx.emplace_back(Shape{N, C}, DType::f32);
      dw.emplace_back(Shape{C}, DType::f32);
      table->rmsnorm_backward(kParams, dy, x, w, saved, dx.back(), dw.back(), Accumulate::overwrite);
    }
    for (size_t i = 1; i < dx.size(); ++i) {
      EXPECT_EQ(std::memcmp(dx[0].data<float>(), dx[i].data<float>(), dx[0].nbytes()), 0)
          << kernel_variant_name(table->variant);
      EXPECT_EQ(std::memcmp(dw[0].data<float>(), dw[i].data<float>(), dw[0].nbytes()), 0)
          << kernel_variant_name(table->variant);
    }
  }
  omp_set_num_threads(threads_before);
}

// bf16 follows HF's `weight * hidden.to(bf16)`: y = bf16(w * bf16(x * rstd)). Recomputed here in
// f32 from the saved rstd, it must agree exactly with nearly every element (a difference in the
// last bit of rstd may move an x * rstd across a bf16 rounding boundary, rarely); without the
// intermediate rounding about a quarter of them would differ.
TEST(RmsNorm, Bf16RoundsTheNormalisedInputBeforeTheGain) {
  const int64_t N = 16, C = 64;
  const Tensor x = random_tensor({N, C}, DType::bf16, 21, -2.0, 2.0);
  const Tensor w = random_tensor({C}, DType::bf16, 22, 0.5, 3.0);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    const Tensor y({N, C}, DType::bf16), rstd({N}, DType::f32);
    RmsNormSaved saved{rstd};
    table->rmsnorm_forward(kParams, x, w, y, saved);
    int64_t mismatches = 0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = to_f32(to_bf16(to_f32(x.at<bf16>({n, c})) * rstd.at<float>({n})));
        const bf16 expected = to_bf16(to_f32(w.at<bf16>({c})) * xhat);
        mismatches += y.at<bf16>({n, c}).bits != expected.bits;
      }
    }
    EXPECT_LE(mismatches, N * C / 100) << kernel_variant_name(table->variant);
  }
}

TEST(RmsNorm, RefBackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 5;
  const Tensor x = random_tensor({N, C}, DType::f64, 31, -2.0, 2.0);
  const Tensor w = random_tensor({C}, DType::f64, 32, -1.5, 1.5);
  const Tensor r = random_tensor({N, C}, DType::f64, 33);
  const Tensor y({N, C}, DType::f64), rstd({N}, DType::f64);
  RmsNormSaved saved{rstd};
  auto loss = [&] {
    ref::rmsnorm_forward(kParams, x, w, y, saved);
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  loss();
  const Tensor dx({N, C}, DType::f64), dw({C}, DType::f64);
  ref::rmsnorm_backward(kParams, r, x, w, saved, dx, dw, Accumulate::overwrite);
  testing::expect_gradient_matches_fd(loss, x, dx, "rmsnorm dx");
  testing::expect_gradient_matches_fd(loss, w, dw, "rmsnorm dw");

  // add mode and dw += land on top of what was there.
  const Tensor dx_before = random_tensor({N, C}, DType::f64, 34), dw_before = random_tensor({C}, DType::f64, 35);
  const Tensor dx_acc = clone(dx_before, DType::f64), dw_acc = clone(dw_before, DType::f64);
  ref::rmsnorm_backward(kParams, r, x, w, saved, dx_acc, dw_acc, Accumulate::add);
  for (int64_t i = 0; i < N * C; ++i)
    EXPECT_NEAR(dx_acc.data<double>()[i], dx_before.data<double>()[i] + dx.data<double>()[i], 1e-14);
  for (int64_t c = 0; c < C; ++c)
    EXPECT_NEAR(dw_acc.data<double>()[c], dw_before.data<double>()[c] + dw.data<double>()[c], 1e-14);
}

TEST(RmsNorm, RejectsBadShapesAndDtypes) {
  const Tensor x({4, 8}, DType::f32), y({4, 8}, DType::f32), rstd({4}, DType::f32);
  const Tensor w_wrong_length({9}, DType::f32), rstd_f64({4}, DType::f64), w({8}, DType::f32);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    RmsNormSaved saved{rstd}, saved_f64{rstd_f64};
    EXPECT_THROW(table->rmsnorm_forward(kParams, x, w_wrong_length, y, saved), Error);
    EXPECT_THROW(table->rmsnorm_forward(kParams, x, w, y, saved_f64), Error);
  }
}

}  // namespace
}  // namespace rf::kernels
