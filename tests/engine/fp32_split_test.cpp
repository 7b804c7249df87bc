// Fp32Split (optim/fp32_split.h): over about 4.8 million f32 bit patterns, every sign and exponent with the low
// halves that matter (0, 1, the two ties, either side of them, the extremes) plus a strided sweep of the whole
// range (zeros, denormals, values that round up across an exponent boundary, max finite rounding to inf, inf,
// quiet and signalling NaNs), the bf16 half is rf::to_bf16 and the join gives the pattern back bit for bit; only
// ties rounded down to an even half and quietened NaNs need the side table. Re-splitting a range drops its old
// table entries, and a join of a part at an offset reads that part's remainders.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "optim/fp32_split.h"

namespace rf::optim {
namespace {

constexpr int64_t kChunk = 1 << 20;

std::vector<uint32_t> interesting_patterns() {
  std::vector<uint32_t> out;
  for (uint32_t high = 0; high < 0x10000u; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x4000u, 0x7fffu, 0x8000u, 0x8001u, 0xc000u, 0xffffu})
      out.push_back(high << 16 | low);
  for (uint64_t u = 0; u <= 0xffffffffull; u += 1009) out.push_back(uint32_t(u));
  return out;
}

// Whether a pattern's remainder cannot fit 16 bits, from the rounding rules: a tie (low half 0x8000) whose high
// half is even rounds down, +0x8000; a NaN's half is its high half quietened, which reaches back only when the
// NaN was quiet already and its low half is below 0x8000.
bool needs_table(uint32_t u) {
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  if (nan) return !((u & 0x00400000u) && (u & 0xffffu) < 0x8000u);
  return (u & 0xffffu) == 0x8000u && ((u >> 16) & 1u) == 0;
}

TEST(Fp32Split, JoinOfSplitIsEveryPatternAndTheHalfIsTheBf16Rounding) {
  const std::vector<uint32_t> patterns = interesting_patterns();
  ASSERT_GT(patterns.size(), 4'500'000u);
  int64_t ties = 0, nans = 0;
  for (size_t begin = 0; begin < patterns.size(); begin += kChunk) {
    const int64_t N = std::min<int64_t>(kChunk, int64_t(patterns.size() - begin));
    Tensor x_N({N}, DType::f32), hi_N({N}, DType::bf16), joined_N({N}, DType::f32);
    std::memcpy(x_N.data<float>(), patterns.data() + begin, size_t(N) * sizeof(float));
    Fp32Split split(N, {});
    split.split(x_N, hi_N, 0);
    split.join(hi_N, 0, joined_N);
    int64_t expected_table = 0;
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t u = patterns[begin + size_t(n)];
      const float x = std::bit_cast<float>(u);
      ASSERT_EQ(hi_N.data<bf16>()[n].bits, to_bf16(x).bits) << std::hex << "pattern 0x" << u;
      ASSERT_EQ(std::bit_cast<uint32_t>(joined_N.data<float>()[n]), u) << std::hex << "pattern 0x" << u;
      uint16_t hi = 0;
      int16_t remainder = 0;
      const bool fits = split_f32(x, hi, remainder);
      ASSERT_EQ(fits, !needs_table(u)) << std::hex << "pattern 0x" << u;
      if (fits) {
        ASSERT_EQ(std::bit_cast<uint32_t>(join_f32(hi, remainder)), u) << std::hex << "pattern 0x" << u;
      }
      expected_table += !fits;
      const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
      nans += nan && !fits;
      ties += !nan && !fits;
    }
    EXPECT_EQ(split.num_exact(), expected_table);
  }
  // Every even half's tie rounded down is among the patterns with low half 0x8000, and only those.
  EXPECT_GT(ties, 30000);
  EXPECT_GT(nans, 0);
}

TEST(Fp32Split, ResplittingARangeReplacesItsTableAndJoinsReadTheirOffset) {
  // 1 + 2^-8 is a tie that rounds down to the even 1.0: kept whole.
  const float tie = std::bit_cast<float>(0x3f808000u);
  Tensor x_N({4}, DType::f32), hi_N({4}, DType::bf16), out_N({2}, DType::f32);
  const float values[] = {0.5f, tie, -tie, 3.0f};
  std::memcpy(x_N.data<float>(), values, sizeof(values));
  Fp32Split split(4, {});
  split.split(x_N, hi_N, 0);
  EXPECT_EQ(split.num_exact(), 2);
  split.join(hi_N.view().slice(0, 1, 2), 1, out_N);
  EXPECT_EQ(std::bit_cast<uint32_t>(out_N.data<float>()[0]), std::bit_cast<uint32_t>(tie));
  EXPECT_EQ(std::bit_cast<uint32_t>(out_N.data<float>()[1]), std::bit_cast<uint32_t>(-tie));
  // Elements 1 and 2 become exact bf16 values: their table entries go.
  x_N.data<float>()[1] = 1.0f;
  x_N.data<float>()[2] = -2.0f;
  split.split(x_N.view().slice(0, 1, 2), hi_N.view().slice(0, 1, 2), 1);
  EXPECT_EQ(split.num_exact(), 0);
  split.join(hi_N.view().slice(0, 1, 2), 1, out_N);
  EXPECT_EQ(out_N.data<float>()[0], 1.0f);
  EXPECT_EQ(out_N.data<float>()[1], -2.0f);
}

}  // namespace
}  // namespace rf::optim
