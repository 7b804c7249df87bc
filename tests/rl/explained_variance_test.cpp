// critic/vf_explained_var (rl/explained_variance.h): a hand-computed case, its edge values (perfect values,
// values that explain nothing, fewer than 2 tokens), and the vectorized form against its loop twin on random
// masked batches (ragged masks, interior holes, fully masked rows).
//
// Dimension legend: B batch (responses), T response tokens.
#include "rl/explained_variance.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/element_access.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

Tensor matrix(int64_t B, int64_t T, std::initializer_list<double> values, DType dtype = DType::f64) {
  Tensor t({B, T}, dtype);
  int64_t i = 0;
  for (double v : values) store_f64(t, i++, v);
  return t;
}

TEST(VfExplainedVar, HandComputedCases) {
  // Masked returns G = (1, 2, 3, 4) (the 9s are off the mask), values V = (1, 1, 3, 3): G - V = (0, 1, 0, 1).
  // Unbiased variances: var(G) = 5/3, var(G - V) = 1/3, so 1 - (1/3) / (5/3 + 1e-5).
  const Tensor returns = matrix(2, 3, {1, 2, 9, 3, 4, 9});
  const Tensor values = matrix(2, 3, {1, 1, 9, 3, 3, -9});
  const Tensor mask = matrix(2, 3, {1, 1, 0, 1, 1, 0}, DType::f32);
  const double expected = 1.0 - (1.0 / 3.0) / (5.0 / 3.0 + 1e-5);
  EXPECT_NEAR(rl::vf_explained_var(returns, values, mask), expected, 1e-15);
  EXPECT_NEAR(rl::vf_explained_var_loop(returns, values, mask), expected, 1e-15);
  // Values equal to the returns explain all of it; constant values none (var(G - c) = var(G)).
  EXPECT_NEAR(rl::vf_explained_var(returns, returns, mask), 1.0, 1e-15);
  const Tensor constant = matrix(2, 3, {7, 7, 7, 7, 7, 7});
  EXPECT_NEAR(rl::vf_explained_var(returns, constant, mask), 1.0 - (5.0 / 3.0) / (5.0 / 3.0 + 1e-5), 1e-15);
  // torch.var of fewer than 2 elements is NaN.
  const Tensor one_token = matrix(2, 3, {0, 0, 1, 0, 0, 0}, DType::f32);
  EXPECT_TRUE(std::isnan(rl::vf_explained_var(returns, values, one_token)));
  EXPECT_TRUE(std::isnan(rl::vf_explained_var_loop(returns, values, one_token)));
  EXPECT_THROW(rl::vf_explained_var(returns, matrix(3, 2, {}), mask), Error);
}

TEST(VfExplainedVar, VectorizedMatchesTheLoopTwin) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const int64_t B = 2 + int64_t(seed % 5), T = 1 + int64_t(seed % 7);
    const DType dtype = seed % 2 == 0 ? DType::f32 : DType::f64;
    const Tensor mask = random_response_mask(B, T, seed);
    const Tensor returns = random_tensor({B, T}, dtype, seed + 100, -2.0, 3.0);
    const Tensor values = random_tensor({B, T}, dtype, seed + 200, -1.0, 1.0);
    const double loop = rl::vf_explained_var_loop(returns, values, mask);
    const double vectorized = rl::vf_explained_var(returns, values, mask);
    if (std::isnan(loop)) {
      EXPECT_TRUE(std::isnan(vectorized)) << "seed " << seed;
      continue;
    }
    EXPECT_NEAR(vectorized, loop, 1e-12 * (1 + std::abs(loop))) << "seed " << seed;
  }
}

}  // namespace
}  // namespace rf::testing
