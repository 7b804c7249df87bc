// Tests of the shared helpers of cpu/elementwise.h that the op tests only see through a tolerance.
// Those helpers are inline in each variant's namespace, so the test reaches exp_nonpositive through
// an op that returns it unchanged: logprob_backward with lse = 0, temperature 1, dlogp = 1 and no
// entropy term writes dlogits = -p = -e^x for every column but the target's.
// Legend: N rows, V columns of the probe.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/tensor.h"
#include "kernels/fast_variants.h"

namespace rf::kernels {
namespace {

// -e^x for every x in xs, by the variant's logprob_backward (see the file comment).
std::vector<float> minus_exp_by_logprob(const KernelTable& table, const std::vector<float>& xs) {
  constexpr int64_t kColumns = 4096;  // probe values per row; column kColumns holds the target
  const int64_t N = (int64_t(xs.size()) + kColumns - 1) / kColumns, V = kColumns + 1;
  const Tensor logits({N, V}, DType::f32), targets({N}, DType::i32), lse({N}, DType::f32);
  const Tensor dlogp({N}, DType::f32), dlogits({N, V}, DType::f32);
  float* x_NV = logits.view().data<float>();
  for (size_t i = 0; i < xs.size(); ++i) x_NV[int64_t(i) / kColumns * V + int64_t(i) % kColumns] = xs[i];
  for (int64_t n = 0; n < N; ++n) {
    targets.view().data<int32_t>()[n] = int32_t(kColumns);
    dlogp.view().data<float>()[n] = 1.0f;
  }
  table.logprob_backward(LogprobParams{}, logits, targets, lse, TensorView{}, dlogp, TensorView{}, dlogits);
  std::vector<float> out(xs.size());
  const float* dx_NV = dlogits.view().data<float>();
  for (size_t i = 0; i < xs.size(); ++i) out[i] = dx_NV[int64_t(i) / kColumns * V + int64_t(i) % kColumns];
  return out;
}

// The documented bound, 1.02 ulp over [-87, 0], on a sample of ~4.4M floats of that range (every
// 257th bit pattern: all exponents, scattered mantissas; the exhaustive check takes too long for
// the suite), at every variant.
TEST(ExpNonpositive, WithinOneUlpOnNonpositiveRange) {
  std::vector<float> xs;
  const uint32_t last = std::bit_cast<uint32_t>(87.0f);
  for (uint32_t bits = 1; bits <= last; bits += 257) xs.push_back(-std::bit_cast<float>(bits));
  xs.push_back(-87.0f);
  std::vector<double> expected(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) expected[i] = std::exp(double(xs[i]));

  for (const KernelTable* table : fast_tables()) {
    const std::vector<float> got = minus_exp_by_logprob(*table, xs);
    double worst_ulp = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double ulp = std::ldexp(1.0, std::ilogb(float(expected[i])) - 23);
      const double err = std::fabs(-double(got[i]) - expected[i]) / ulp;
      if (!(err <= worst_ulp)) worst_ulp = err, worst_x = xs[i];  // a NaN result counts as worst
    }
    EXPECT_LE(worst_ulp, 1.02) << kernel_variant_name(table->variant) << ": worst at x = " << worst_x;
  }
}

// The clamps: 1 at and slightly above 0, 0 below -87 (-inf cannot pass through the probe), NaN
// stays NaN.
TEST(ExpNonpositive, ClampsAndNaN) {
  const float below = std::nextafter(-87.0f, -100.0f);
  const std::vector<float> xs = {0.0f, -0.0f, 1e-7f, 3e-5f, below, -100.0f, -1e30f,
                                 std::numeric_limits<float>::quiet_NaN()};
  for (const KernelTable* table : fast_tables()) {
    const std::vector<float> got = minus_exp_by_logprob(*table, xs);
    const auto variant = kernel_variant_name(table->variant);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], -1.0f) << variant << ": x = " << xs[i];
    for (size_t i = 4; i < 7; ++i) EXPECT_EQ(got[i], 0.0f) << variant << ": x = " << xs[i];
    EXPECT_TRUE(std::isnan(got[7])) << variant;
  }
}

}  // namespace
}  // namespace rf::kernels
