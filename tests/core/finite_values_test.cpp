// all_finite / first_non_finite: a NaN or Inf found in every floating dtype, at any position (the
// parallel pass splits the range across threads), in strided views; integers and empty views are finite.
#include "core/finite_values.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/element_access.h"
#include "core/tensor.h"

namespace rf {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor ramp(int64_t n, DType dtype) {
  Tensor t({n}, dtype);
  for (int64_t i = 0; i < n; ++i) store_f64(t, i, double(i % 97) - 48.0);
  return t;
}

TEST(FiniteValues, FindsNanAndInfInEveryFloatingDtypeAtAnyPosition) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t n = 10007;
    for (int64_t at : {int64_t(0), int64_t(5003), n - 1})
      for (double bad : {kNan, kInf, -kInf}) {
        Tensor t = ramp(n, dtype);
        EXPECT_TRUE(all_finite(t));
        EXPECT_FALSE(first_non_finite(t).has_value());
        store_f64(t, at, bad);
        EXPECT_FALSE(all_finite(t)) << at << " " << bad;
        EXPECT_EQ(first_non_finite(t), at) << bad;
      }
  }
}

TEST(FiniteValues, LargestFiniteValuesAreFinite) {
  Tensor t({2}, DType::f32);
  store_f64(t, 0, std::numeric_limits<float>::max());
  store_f64(t, 1, -std::numeric_limits<float>::max());
  EXPECT_TRUE(all_finite(t));
}

TEST(FiniteValues, StridedViewsLookOnlyAtTheirElements) {
  Tensor t = ramp(12, DType::f32);
  store_f64(t, 5, kNan);  // row 1, column 1 of a 4 x 3 view
  const TensorView m = t.view().reshape({4, 3});
  EXPECT_TRUE(all_finite(m.slice(1, 0, 1)));   // column 0: elements 0, 3, 6, 9
  EXPECT_FALSE(all_finite(m.slice(1, 2, 1)));  // column 2: 2, 5, 8, 11
  EXPECT_EQ(first_non_finite(m.slice(1, 2, 1)), 1);
  EXPECT_EQ(first_non_finite(m.transpose(0, 1)), 9);  // (2, 1) of the 3 x 4 transpose
}

TEST(FiniteValues, IntegersAndEmptyViewsAreFinite) {
  EXPECT_TRUE(all_finite(Tensor({3}, DType::i64)));
  EXPECT_TRUE(all_finite(TensorView()));
  EXPECT_FALSE(first_non_finite(TensorView()).has_value());
}

}  // namespace
}  // namespace rf
