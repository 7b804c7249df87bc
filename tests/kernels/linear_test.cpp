// GEMM and linear layers: the ref kernels against hand-computed values and finite differences
// (f64), then every cpu variant this CPU runs, on every GEMM engine (oneDNN, OpenBLAS, ordered), against
// ref: f32 and bf16, all four transposes, alpha/beta, accumulate modes, empty inner dims, contiguous
// and strided views with sentinels. The ordered GEMM's exact arithmetic: ordered_gemm_test.cpp.
// Legend: N rows (tokens), I in-features, O out-features; a GEMM's c is M x N with inner dim K.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/element_access.h"
#include "kernels/blas_info.h"
#include "kernels/fast_variants.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using rf::testing::expect_close;
using rf::testing::GuardedTensor;
using rf::testing::guarded_copy;
using rf::testing::Layout;
using rf::testing::random_tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr Layout kLayouts[] = {Layout::contiguous, Layout::strided};

const char* name(Layout layout) { return layout == Layout::strided ? "strided" : "contiguous"; }

void fill(TensorView view, double value) {
  for_each_offset(view.shape(), view.strides(), view.strides(),
                  [&](int64_t at, int64_t) { store_f64(view, at, value); });
}

// A guarded output buffer holding `init`, or NaN everywhere when `init` is empty: an output that
// must be overwritten without being read starts as NaN, so reading it shows.
GuardedTensor output_buffer(TensorView init, Shape shape, DType dtype, Layout layout) {
  if (!init.empty()) return guarded_copy(init, layout);
  GuardedTensor out(shape, dtype, layout);
  fill(out, kNaN);
  return out;
}

struct Tolerance {
  double rtol, atol;
};

// The fast kernels accumulate in f32 and ref in f64, so an f32 result is off by up to about
// K * eps_f32 * max|term| (terms are products of values in [-1, 1)), hence atol ~ 1e-6 per term.
// A bf16 result may in addition round to the neighbouring bf16 value when the f32 sum sits near
// a rounding boundary: 2 ulps of bf16 (2^-8 relative each) covers it.
Tolerance tolerance(DType out, int64_t K) { return {out == DType::bf16 ? 8e-3 : 1e-5, 1e-6 * double(K + 1)}; }

struct InOut {
  DType in, out;
};
constexpr InOut kFastGemmDTypes[] = {{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::bf16, DType::bf16}};
constexpr DType kFastDTypes[] = {DType::f32, DType::bf16};

// Shapes that fit no tile, a row or column vector, and an empty inner dim.
struct GemmShape {
  int64_t M, N, K;
};
// The last two cross the ordered GEMM's k slice (256), row block (8 tiles of rows) and column block.
constexpr GemmShape kGemmShapes[] = {{1, 1, 1},  {7, 13, 37}, {64, 33, 129}, {1, 17, 5},
                                     {9, 1, 3},  {4, 5, 0},    {101, 21, 300}, {3, 530, 19}};

// (N, I, O): as above, plus no rows (wgrad's inner dim is N) and no in-features.
struct LinearShape {
  int64_t N, I, O;
};
constexpr LinearShape kLinearShapes[] = {{1, 1, 1}, {7, 37, 13}, {64, 129, 33}, {5, 3, 1}, {0, 5, 3}, {3, 0, 4}};

// --- ref against hand-computed values and finite differences ----------------------------------

TEST(LinearKernels, RefGemmMatchesHandComputedProduct) {
  // a = [[1, 2, 3], [4, 5, 6]], b = [[7, 8], [9, 10], [11, 12]], a b = [[58, 64], [139, 154]].
  Tensor a({2, 3}, DType::f64), a_t({3, 2}, DType::f64), b({3, 2}, DType::f64), b_t({2, 3}, DType::f64);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 3; ++k) {
      a.at<double>({i, k}) = a_t.at<double>({k, i}) = double(3 * i + k + 1);
      b.at<double>({k, i}) = b_t.at<double>({i, k}) = double(2 * k + i + 7);
    }
  }
  const double product[2][2] = {{58, 64}, {139, 154}};
  for (Transpose ta : {Transpose::no, Transpose::yes}) {
    for (Transpose tb : {Transpose::no, Transpose::yes}) {
      Tensor c({2, 2}, DType::f64);
      fill(c, 1.0);
      ref::table().gemm({.trans_a = ta, .trans_b = tb, .alpha = 2.0, .beta = -1.0}, ta == Transpose::yes ? a_t : a,
                        tb == Transpose::yes ? b_t : b, c);
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(c.at<double>({i, j}), 2 * product[i][j] - 1) << i << "," << j;
    }
  }
}

TEST(LinearKernels, RefBackwardMatchesFiniteDifferences) {
  const int64_t N = 3, I = 4, O = 5;
  const Tensor x = random_tensor({N, I}, DType::f64, 1), w = random_tensor({O, I}, DType::f64, 2),
               b = random_tensor({O}, DType::f64, 3), r = random_tensor({N, O}, DType::f64, 4);
  const Tensor y({N, O}, DType::f64);
  // loss = sum(y * r), so dloss/dy = r.
  auto loss = [&] {
    ref::table().linear_forward(x, w, b, y);
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  const Tensor dx({N, I}, DType::f64);
  ref::table().linear_dgrad(r, w, dx, Accumulate::overwrite);
  // wgrad adds to what is there: start from non-zero values and take the difference.
  const Tensor dw0 = random_tensor({O, I}, DType::f64, 5), db0 = random_tensor({O}, DType::f64, 6);
  const Tensor dw = clone(dw0, DType::f64), db = clone(db0, DType::f64);
  ref::table().linear_wgrad(r, x, dw, db, Accumulate::add);
  for (int64_t i = 0; i < dw.numel(); ++i) dw.data<double>()[i] -= dw0.data<double>()[i];
  for (int64_t i = 0; i < db.numel(); ++i) db.data<double>()[i] -= db0.data<double>()[i];
  rf::testing::expect_gradient_matches_fd(loss, x, dx, "dx");
  rf::testing::expect_gradient_matches_fd(loss, w, dw, "dw");
  rf::testing::expect_gradient_matches_fd(loss, b, db, "db");

  // Accumulate::add lands exactly the overwrite result on top of what dx held.
  const Tensor dx_add = random_tensor({N, I}, DType::f64, 7);
  const Tensor dx_expected = clone(dx_add, DType::f64);
  for (int64_t i = 0; i < dx.numel(); ++i) dx_expected.data<double>()[i] += dx.data<double>()[i];
  ref::table().linear_dgrad(r, w, dx_add, Accumulate::add);
  expect_close(dx_add, dx_expected, 1e-15, 1e-15, "dx add");
}

// --- cpu variants against ref ---------------------------------------------------------------------

TEST(LinearKernels, GemmMatchesRef) {
  ASSERT_FALSE(fast_tables(DType::f32).empty());
  struct AlphaBeta {
    double alpha, beta;
  };
  uint64_t seed = 100;
  for (const GemmShape& s : kGemmShapes) {
    for (const InOut& dt : kFastGemmDTypes) {
      for (Transpose ta : {Transpose::no, Transpose::yes}) {
        for (Transpose tb : {Transpose::no, Transpose::yes}) {
          for (AlphaBeta ab : {AlphaBeta{1, 0}, AlphaBeta{1, 1}, AlphaBeta{-0.5, 0.75}}) {
            const GemmParams p{.trans_a = ta, .trans_b = tb, .alpha = ab.alpha, .beta = ab.beta};
            const Shape a_shape = ta == Transpose::yes ? Shape{s.K, s.M} : Shape{s.M, s.K};
            const Shape b_shape = tb == Transpose::yes ? Shape{s.N, s.K} : Shape{s.K, s.N};
            const Tensor a = random_tensor(a_shape, dt.in, ++seed), b = random_tensor(b_shape, dt.in, ++seed);
            const Tensor c0 = random_tensor({s.M, s.N}, dt.out, ++seed);
            const TensorView c_init = ab.beta == 0 ? TensorView() : c0.view();
            const GuardedTensor expected = output_buffer(c_init, {s.M, s.N}, dt.out, Layout::contiguous);
            ref::table().gemm(p, a, b, expected);
            const Tolerance tol = tolerance(dt.out, s.K);
            for (const auto& [table, table_name] : fast_tables(dt.in)) {
              for (Layout layout : kLayouts) {
                const std::string what =
                    fmt::format("{} gemm {}x{}x{} {}->{} trans {}{} alpha {} beta {} {}", table_name, s.M, s.N, s.K,
                                dtype_name(dt.in), dtype_name(dt.out), ta == Transpose::yes ? 't' : 'n',
                                tb == Transpose::yes ? 't' : 'n', ab.alpha, ab.beta, name(layout));
                const GuardedTensor a_g = guarded_copy(a, layout), b_g = guarded_copy(b, layout);
                const GuardedTensor c = output_buffer(c_init, {s.M, s.N}, dt.out, layout);
                table->gemm(p, a_g, b_g, c);
                expect_close(c, expected, tol.rtol, tol.atol, what);
                c.expect_sentinels_intact(what);
              }
            }
          }
        }
      }
    }
  }
}

TEST(LinearKernels, LinearForwardMatchesRef) {
  uint64_t seed = 200;
  for (const LinearShape& s : kLinearShapes) {
    for (DType dtype : kFastDTypes) {
      for (bool with_bias : {false, true}) {
        const Tensor x = random_tensor({s.N, s.I}, dtype, ++seed), w = random_tensor({s.O, s.I}, dtype, ++seed);
        const Tensor b = with_bias ? random_tensor({s.O}, dtype, ++seed) : Tensor();
        const GuardedTensor expected = output_buffer(TensorView(), {s.N, s.O}, dtype, Layout::contiguous);
        ref::table().linear_forward(x, w, b, expected);
        const Tolerance tol = tolerance(dtype, s.I);
        for (const auto& [table, table_name] : fast_tables(dtype)) {
          for (Layout layout : kLayouts) {
            const std::string what = fmt::format("{} linear_forward N={} I={} O={} {} bias={} {}", table_name, s.N,
                                                 s.I, s.O, dtype_name(dtype), with_bias, name(layout));
            const GuardedTensor x_g = guarded_copy(x, layout), w_g = guarded_copy(w, layout);
            const GuardedTensor y = output_buffer(TensorView(), {s.N, s.O}, dtype, layout);
            table->linear_forward(x_g, w_g, with_bias ? guarded_copy(b, layout).view() : TensorView(), y);
            expect_close(y, expected, tol.rtol, tol.atol, what);
            y.expect_sentinels_intact(what);
          }
        }
      }
    }
  }
}

// The fused residual forward against the composition of unfused ref ops: the f64 ref product of
// linear_forward, plus the residual, rounded once to the dtype.
TEST(LinearKernels, LinearResidualForwardMatchesRefComposition) {
  uint64_t seed = 250;
  for (const LinearShape& s : kLinearShapes) {
    for (DType dtype : kFastDTypes) {
      const Tensor x = random_tensor({s.N, s.I}, dtype, ++seed), w = random_tensor({s.O, s.I}, dtype, ++seed);
      const Tensor resid = random_tensor({s.N, s.O}, dtype, ++seed);
      const Tensor product({s.N, s.O}, DType::f64), expected({s.N, s.O}, dtype);
      ref::table().linear_forward(clone(x, DType::f64), clone(w, DType::f64), TensorView(), product);
      for (int64_t n = 0; n < s.N; ++n)
        for (int64_t o = 0; o < s.O; ++o)
          store_f64(expected, n * s.O + o, load_f64(product, n * s.O + o) + load_f64(resid, n * s.O + o));
      const Tolerance tol = tolerance(dtype, s.I);
      std::vector<FastTable> tables = fast_tables(dtype);
      tables.push_back({&ref::table(), "ref"});
      for (const auto& [table, table_name] : tables) {
        for (Layout layout : kLayouts) {
          const std::string what = fmt::format("{} linear_residual_forward N={} I={} O={} {} {}", table_name, s.N,
                                               s.I, s.O, dtype_name(dtype), name(layout));
          const GuardedTensor x_g = guarded_copy(x, layout), w_g = guarded_copy(w, layout);
          const GuardedTensor resid_g = guarded_copy(resid, layout);
          const GuardedTensor y = output_buffer(TensorView(), {s.N, s.O}, dtype, layout);
          table->linear_residual_forward(x_g, w_g, resid_g, y);
          expect_close(y, expected, tol.rtol, tol.atol, what);
          expect_close(resid_g, resid, 0, 0, what + ": residual untouched");
          y.expect_sentinels_intact(what);
        }
      }
    }
  }
}

TEST(LinearKernels, LinearDgradMatchesRefInBothModes) {
  uint64_t seed = 300;
  for (const LinearShape& s : kLinearShapes) {
    for (DType dtype : kFastDTypes) {
      for (Accumulate mode : {Accumulate::overwrite, Accumulate::add}) {
        const Tensor dy = random_tensor({s.N, s.O}, dtype, ++seed), w = random_tensor({s.O, s.I}, dtype, ++seed);
        const Tensor dx0 = random_tensor({s.N, s.I}, dtype, ++seed);
        const TensorView dx_init = mode == Accumulate::add ? dx0.view() : TensorView();
        const GuardedTensor expected = output_buffer(dx_init, {s.N, s.I}, dtype, Layout::contiguous);
        ref::table().linear_dgrad(dy, w, expected, mode);
        const Tolerance tol = tolerance(dtype, s.O);
        for (const auto& [table, table_name] : fast_tables(dtype)) {
          for (Layout layout : kLayouts) {
            const std::string what = fmt::format("{} linear_dgrad N={} I={} O={} {} {} {}", table_name, s.N, s.I,
                                                 s.O, dtype_name(dtype), mode == Accumulate::add ? "add" : "overwrite",
                                                 name(layout));
            const GuardedTensor dy_g = guarded_copy(dy, layout), w_g = guarded_copy(w, layout);
            const GuardedTensor dx = output_buffer(dx_init, {s.N, s.I}, dtype, layout);
            table->linear_dgrad(dy_g, w_g, dx, mode);
            expect_close(dx, expected, tol.rtol, tol.atol, what);
            dx.expect_sentinels_intact(what);
          }
        }
      }
    }
  }
}

// Parameter grads are f32 and either `+=` (accumulate onto non-zero values) or `=` (overwrite: the
// old values, NaN here, must not be read).
TEST(LinearKernels, LinearWgradAccumulatesOrOverwritesLikeRef) {
  uint64_t seed = 400;
  for (const LinearShape& s : kLinearShapes) {
    for (DType dtype : kFastDTypes) {
      for (Accumulate mode : {Accumulate::add, Accumulate::overwrite}) {
        for (bool with_bias : {false, true}) {
          const Tensor dy = random_tensor({s.N, s.O}, dtype, ++seed), x = random_tensor({s.N, s.I}, dtype, ++seed);
          const Tensor dw0 = random_tensor({s.O, s.I}, DType::f32, ++seed);
          const Tensor db0 = random_tensor({s.O}, DType::f32, ++seed);
          const bool add = mode == Accumulate::add;
          const GuardedTensor dw_expected =
              output_buffer(add ? dw0.view() : TensorView(), {s.O, s.I}, DType::f32, Layout::contiguous);
          const GuardedTensor db_expected =
              output_buffer(add ? db0.view() : TensorView(), {s.O}, DType::f32, Layout::contiguous);
          ref::table().linear_wgrad(dy, x, dw_expected, with_bias ? db_expected.view() : TensorView(), mode);
          const Tolerance tol = tolerance(DType::f32, s.N);
          for (const auto& [table, table_name] : fast_tables(dtype)) {
            for (Layout layout : kLayouts) {
              const std::string what =
                  fmt::format("{} linear_wgrad N={} I={} O={} {} bias={} {} {}", table_name, s.N, s.I, s.O,
                              dtype_name(dtype), with_bias, add ? "+=" : "=", name(layout));
              const GuardedTensor dy_g = guarded_copy(dy, layout), x_g = guarded_copy(x, layout);
              const GuardedTensor dw = output_buffer(add ? dw0.view() : TensorView(), {s.O, s.I}, DType::f32, layout);
              const GuardedTensor db = guarded_copy(db0, layout);
              if (!add && with_bias) fill(db, kNaN);
              table->linear_wgrad(dy_g, x_g, dw, with_bias ? db.view() : TensorView(), mode);
              expect_close(dw, dw_expected, tol.rtol, tol.atol, what + " dw");
              dw.expect_sentinels_intact(what + " dw");
              if (with_bias) expect_close(db, db_expected, tol.rtol, tol.atol, what + " db");
              if (!with_bias) expect_close(db, db0, 0, 0, what + " db untouched without a bias");
              db.expect_sentinels_intact(what + " db");
            }
          }
        }
      }
    }
  }
}

TEST(LinearKernels, RejectMismatchedShapesAndDtypes) {
  const Tensor a({4, 3}, DType::f32), b({5, 2}, DType::f32), c({4, 2}, DType::f32);
  const Tensor a64({4, 3}, DType::f64), b64({3, 2}, DType::f64), c64({4, 2}, DType::f64);
  const Tensor dy({4, 2}, DType::bf16), x({4, 3}, DType::bf16), dw_bf16({2, 3}, DType::bf16);
  std::vector<FastTable> tables = fast_tables(DType::bf16);
  tables.push_back({&ref::table(), "ref"});
  for (const auto& [table, table_name] : tables) {
    EXPECT_THROW(table->gemm({}, a, b, c), Error) << table_name << ": K of a and b differ";
    EXPECT_THROW(table->linear_wgrad(dy, x, dw_bf16, TensorView(), Accumulate::add), Error) << table_name << ": dw must be f32";
  }
  for (const auto& [table, table_name] : fast_tables(DType::f32))
    EXPECT_THROW(table->gemm({}, a64, b64, c64), Error) << table_name << ": f64 is ref-only";
}

}  // namespace
}  // namespace rf::kernels
