// Philox: the Random123 known answers, the distributions of uniform / normal draws, and the
// counter contract of the fills (element i of the row-major walk gets counter first_offset + i,
// whatever the strides or the thread count).
#include "core/philox.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/tensor.h"

namespace rf {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, MatchesRandom123KnownAnswers) {
  using Words = std::array<uint32_t, 4>;
  EXPECT_EQ(Philox::block({0, 0, 0, 0}, {0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox::block({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox::block({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

constexpr int kNumDraws = 100'000;

struct Moments {
  double mean = 0, variance = 0;
};

template <class Draw>
Moments moments_of(Draw draw) {
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kNumDraws; ++i) {
    const double x = draw(uint64_t(i));
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / kNumDraws;
  return {mean, sum_sq / kNumDraws - mean * mean};
}

// Tolerances are about 5 standard errors of the estimate for 1e5 draws.
TEST(Philox, UniformIsInUnitIntervalWithMoments) {
  const Philox rng(1234, 0);
  double low = 1, high = 0;
  int below_tenth = 0;
  for (int i = 0; i < kNumDraws; ++i) {
    const double u = rng.uniform(uint64_t(i));
    low = std::min(low, u);
    high = std::max(high, u);
    below_tenth += u < 0.1;
  }
  EXPECT_GE(low, 0.0);
  EXPECT_LT(high, 1.0);
  EXPECT_LT(low, 1e-3);
  EXPECT_GT(high, 1 - 1e-3);
  EXPECT_NEAR(below_tenth / double(kNumDraws), 0.1, 0.005);
  const Moments m = moments_of([&](uint64_t o) { return rng.uniform(o); });
  EXPECT_NEAR(m.mean, 0.5, 0.005);
  EXPECT_NEAR(m.variance, 1.0 / 12, 0.0015);
}

TEST(Philox, NormalHasZeroMeanUnitVariance) {
  const Philox rng(99, 7);
  const Moments m = moments_of([&](uint64_t o) { return rng.normal(o); });
  EXPECT_NEAR(m.mean, 0.0, 0.016);
  EXPECT_NEAR(m.variance, 1.0, 0.025);
  int within_one = 0;
  for (int i = 0; i < kNumDraws; ++i) within_one += std::abs(rng.normal(uint64_t(i))) < 1.0;
  EXPECT_NEAR(within_one / double(kNumDraws), 0.6827, 0.0075);
}

TEST(Philox, DrawsArePureFunctionsOfSeedStreamOffset) {
  const Philox a(5, 0), same(5, 0), other_stream(5, 1), other_seed(6, 0);
  int equal_stream = 0, equal_seed = 0;
  for (uint64_t o = 0; o < 1000; ++o) {
    EXPECT_EQ(a.uniform(o), same.uniform(o));
    equal_stream += a.uniform(o) == other_stream.uniform(o);
    equal_seed += a.uniform(o) == other_seed.uniform(o);
  }
  EXPECT_EQ(equal_stream, 0);
  EXPECT_EQ(equal_seed, 0);
  EXPECT_NE(a.uniform(0), a.uniform(1));
  // The counter is (offset lo, offset hi, stream lo, stream hi), the key the seed.
  const uint64_t offset = 0x123456789abcdefull, stream = 0xfedcba987654321ull, seed = 0x0f1e2d3c4b5a6978ull;
  EXPECT_EQ(Philox(seed, stream).block_at(offset),
            Philox::block({0x89abcdefu, 0x01234567u, 0x87654321u, 0x0fedcba9u}, {0x4b5a6978u, 0x0f1e2d3cu}));
}

TEST(Philox, FillUsesRowMajorCounterWhateverTheStrides) {
  const Philox rng(42, 3);
  constexpr uint64_t kFirst = 17;
  Tensor contiguous(Shape{6, 7}, DType::f64);
  fill_uniform(contiguous, rng, -2.0, 3.0, kFirst);
  for (int64_t i = 0; i < 42; ++i)
    ASSERT_EQ(contiguous.data<double>()[i], -2.0 + 5.0 * rng.uniform(kFirst + uint64_t(i))) << i;

  // A [6, 7] window with row stride 10 inside a larger buffer; the gaps stay zero.
  Tensor buffer(Shape{6, 10}, DType::f64);
  const TensorView window = buffer.view().slice(1, 2, 7);
  fill_uniform(window, rng, -2.0, 3.0, kFirst);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 10; ++c) {
      const double expected = c >= 2 && c < 9 ? contiguous.at<double>({r, c - 2}) : 0.0;
      ASSERT_EQ(buffer.at<double>({r, c}), expected) << r << "," << c;
    }

  // A transposed view: its own row-major walk decides the counters, not the memory order.
  Tensor storage(Shape{7, 6}, DType::f64);
  fill_uniform(storage.view().transpose(0, 1), rng, -2.0, 3.0, kFirst);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 7; ++c) ASSERT_EQ(storage.at<double>({c, r}), contiguous.at<double>({r, c}));

  // bf16 output holds the rounded f64 draw.
  Tensor low_precision(Shape{6, 7}, DType::bf16);
  fill_uniform(low_precision, rng, -2.0, 3.0, kFirst);
  for (int64_t i = 0; i < 42; ++i)
    ASSERT_EQ(low_precision.data<bf16>()[i].bits, to_bf16(float(contiguous.data<double>()[i])).bits);

  EXPECT_THROW(fill_uniform(Tensor(Shape{3}, DType::i32), rng, 0.0, 1.0), Error);
}

TEST(Philox, FillIsIndependentOfThreadCount) {
  const Philox rng(7, 11);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor one(Shape{64, 33}, DType::f32), one_normal(Shape{64, 33}, DType::f32);
  fill_uniform(one, rng, 0.0, 1.0);
  fill_normal(one_normal, rng, 1.0, 2.0);
  omp_set_num_threads(4);
  Tensor many(Shape{64, 33}, DType::f32), many_normal(Shape{64, 33}, DType::f32);
  fill_uniform(many, rng, 0.0, 1.0);
  fill_normal(many_normal, rng, 1.0, 2.0);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.view().raw(), many.view().raw(), one.nbytes()), 0);
  EXPECT_EQ(std::memcmp(one_normal.view().raw(), many_normal.view().raw(), one.nbytes()), 0);
  for (int64_t i = 0; i < one_normal.numel(); i += 97)
    EXPECT_EQ(one_normal.data<float>()[i], float(1.0 + 2.0 * rng.normal(uint64_t(i))));
}

}  // namespace
}  // namespace rf
