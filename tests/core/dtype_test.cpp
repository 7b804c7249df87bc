// DType names and sizes, and the 16-bit float conversions: bf16 against an independent
// round-to-nearest-even oracle, f16 bit for bit against the F16C instructions (this file is
// compiled with -mf16c; the tests skip on a CPU without F16C).
#include "core/dtype.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace rf {
namespace {

float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// ---- names, sizes, parsing ----------------------------------------------------------------

TEST(DType, SizesNamesAndParseRoundTrip) {
  const DType all[] = {DType::f32, DType::bf16, DType::f16, DType::f64,
                       DType::i32, DType::i64,  DType::u8,  DType::boolean};
  const size_t sizes[] = {4, 2, 2, 8, 4, 8, 1, 1};
  const char* names[] = {"f32", "bf16", "f16", "f64", "i32", "i64", "u8", "bool"};
  static_assert(std::size(all) == kNumDTypes);
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_EQ(dtype_size(all[i]), sizes[i]) << names[i];
    EXPECT_EQ(dtype_name(all[i]), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), all[i]) << names[i];
    EXPECT_EQ(is_floating(all[i]), i < 4) << names[i];
  }
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("float64"), DType::f64);
  EXPECT_EQ(sizeof(bf16), 2u);
  EXPECT_EQ(sizeof(f16), 2u);
}

TEST(DType, ParseErrorNamesTheText) {
  for (const char* text : {"float17", "", "F32", "int8"}) {
    try {
      parse_dtype(text);
      ADD_FAILURE() << "parse_dtype('" << text << "') did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("'{}'", text)), std::string::npos) << e.what();
    }
  }
}

// ---- bf16 ---------------------------------------------------------------------------------

// Independent oracle: the two bf16 neighbours of x, compared in double; ties go to the even one.
uint16_t bf16_oracle(uint32_t u) {
  const float x = float_of(u);
  if (std::isnan(x)) return 0;  // not used for NaN
  const uint32_t down = u & 0xffff0000u;
  const uint32_t up = down + 0x10000u;  // next bf16 away from zero (may be inf)
  if (down == u) return uint16_t(u >> 16);
  const double d_down = std::abs(double(x) - double(float_of(down)));
  // The value one bf16 step beyond the largest finite one is 2^128, not representable as float.
  const double beyond = (up & 0x7fffffffu) == 0x7f800000u ? std::ldexp(1.0, 128) : std::abs(double(float_of(up)));
  const double d_up = std::abs(std::abs(double(x)) - beyond);
  if (d_down < d_up) return uint16_t(down >> 16);
  if (d_up < d_down) return uint16_t(up >> 16);
  return uint16_t(((down >> 16) & 1u) ? up >> 16 : down >> 16);
}

TEST(DType, Bf16RoundsToNearestEven) {
  // Ties go to the even mantissa, in both directions and both signs.
  EXPECT_EQ(to_bf16(float_of(0x3f808000u)).bits, 0x3f80);  // 1 + 2^-8: tie, down to even
  EXPECT_EQ(to_bf16(float_of(0x3f818000u)).bits, 0x3f82);  // tie, up to even
  EXPECT_EQ(to_bf16(float_of(0x3f808001u)).bits, 0x3f81);  // just above the tie
  EXPECT_EQ(to_bf16(float_of(0x3f807fffu)).bits, 0x3f80);  // just below the tie
  EXPECT_EQ(to_bf16(float_of(0xbf818000u)).bits, 0xbf82);
  EXPECT_EQ(to_bf16(float_of(0x3f7fffffu)).bits, 0x3f80);  // carries into the exponent
  // Subnormals round like everything else; the smallest tie goes to zero.
  EXPECT_EQ(to_bf16(float_of(0x00008000u)).bits, 0x0000);
  EXPECT_EQ(to_bf16(float_of(0x00018000u)).bits, 0x0002);
  EXPECT_EQ(to_bf16(float_of(0x80000001u)).bits, 0x8000);
  EXPECT_EQ(to_bf16(0.0f).bits, 0x0000);
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000);
}

TEST(DType, Bf16OverflowAndSpecialValuesMatchTorch) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_bf16(inf).bits, 0x7f80);
  EXPECT_EQ(to_bf16(-inf).bits, 0xff80);
  // bf16 max is 0x7f7f; up to (not including) the midpoint to 2^128 it stays finite, from the
  // midpoint on (a tie, and 0x7f7f is odd) it becomes inf, as torch's .bfloat16() does.
  EXPECT_EQ(to_bf16(float_of(0x7f7f7fffu)).bits, 0x7f7f);
  EXPECT_EQ(to_bf16(float_of(0x7f7f8000u)).bits, 0x7f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::max()).bits, 0xff80);
  // NaN stays NaN (never becomes inf by rounding the payload away), keeping its sign.
  for (uint32_t u : {0x7f800001u, 0x7f80ffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    const bf16 b = to_bf16(float_of(u));
    EXPECT_TRUE(std::isnan(to_f32(b))) << std::hex << u;
    EXPECT_EQ(b.bits & 0x8000u, (u >> 16) & 0x8000u) << std::hex << u;
  }
}

TEST(DType, Bf16MatchesOracleOverFloatSweep) {
  int64_t mismatches = 0;
  for (uint64_t u64 = 0; u64 < (uint64_t(1) << 32); u64 += 977) {
    const uint32_t u = uint32_t(u64);
    if (std::isnan(float_of(u))) continue;
    const uint16_t got = to_bf16(float_of(u)).bits;
    if (got != bf16_oracle(u) && ++mismatches <= 5)
      ADD_FAILURE() << std::hex << "to_bf16(0x" << u << ") = 0x" << got << ", expected 0x" << bf16_oracle(u);
  }
  // Exact midpoints between neighbouring bf16 values, and one float ulp either side.
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    if ((b & 0x7f80u) == 0x7f80u) continue;  // inf / NaN
    const uint32_t mid = (b << 16) | 0x8000u;
    for (uint32_t u : {mid - 1, mid, mid + 1}) {
      const uint16_t got = to_bf16(float_of(u)).bits;
      if (got != bf16_oracle(u) && ++mismatches <= 5)
        ADD_FAILURE() << std::hex << "to_bf16(0x" << u << ") = 0x" << got << ", expected 0x" << bf16_oracle(u);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DType, Bf16ToF32IsExactAndRoundTrips) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float x = to_f32(bf16{uint16_t(b)});
    ASSERT_EQ(bits_of(x), b << 16);
    if (!std::isnan(x)) {
      ASSERT_EQ(to_bf16(x).bits, b);
    }
  }
}

// ---- f16 against F16C ---------------------------------------------------------------------

#define RF_REQUIRE_F16C()                                         \
  do {                                                            \
    if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C"; \
  } while (false)

TEST(DType, F16ToF32MatchesF16cForAllPatterns) {
  RF_REQUIRE_F16C();
  int mismatches = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t got = bits_of(to_f32(f16{uint16_t(h)}));
    const uint32_t want = bits_of(_cvtsh_ss(uint16_t(h)));
    if (got != want && ++mismatches <= 5)
      ADD_FAILURE() << std::hex << "to_f32(f16 0x" << h << ") = 0x" << got << ", F16C gives 0x" << want;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DType, F32ToF16MatchesF16cRoundToNearestEven) {
  RF_REQUIRE_F16C();
  int mismatches = 0;
  auto check = [&](uint32_t u) {
    const uint16_t got = to_f16(float_of(u)).bits;
    const uint16_t want = _cvtss_sh(float_of(u), _MM_FROUND_TO_NEAREST_INT);
    if (got != want && ++mismatches <= 5)
      ADD_FAILURE() << std::hex << "to_f16(0x" << u << ") = 0x" << got << ", F16C gives 0x" << want;
  };
  // ~4.4M patterns spread over every exponent, both signs, NaN payloads included.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 977) check(uint32_t(u));
  // Every half value: itself, the exact float midpoint to its successor (a tie), one float ulp
  // either side. Covers subnormal halves, the subnormal/normal boundary and, at 0x7bff, the
  // overflow threshold 65520 (a tie that rounds to inf).
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const double lo = double(_cvtsh_ss(uint16_t(h)));
    const double hi = h == 0x7bffu ? 65536.0 : double(_cvtsh_ss(uint16_t(h + 1)));
    const uint32_t mid = bits_of(float((lo + hi) / 2));  // exact: 12 significant bits
    for (uint32_t u : {bits_of(float(lo)), mid - 1, mid, mid + 1}) {
      check(u);
      check(u | 0x80000000u);
    }
  }
  // Below half's range: the float subnormals and tiny normals that round to 0 or 2^-24.
  for (uint32_t u = 0x32fffff0u; u <= 0x33000010u; ++u) check(u);
  for (uint32_t u = 0; u < 0x1000u; ++u) check(u);
  // Large values: every float exponent above half's range rounds to inf.
  for (uint32_t e = 0x8f; e <= 0xfe; ++e) check((e << 23) | 0x12345u);
  EXPECT_EQ(mismatches, 0);
}

TEST(DType, F16SpecialValues) {
  EXPECT_EQ(to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_f16(65519.99f).bits, 0x7bff);
  EXPECT_EQ(to_f16(65520.0f).bits, 0x7c00);  // the tie above the max goes to inf
  EXPECT_EQ(to_f16(-1e9f).bits, 0xfc00);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie with zero: even
  EXPECT_EQ(to_f16(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(to_f16(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(to_f32(to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(to_f32(f16{0x3c00}), 1.0f);
  EXPECT_EQ(to_f32(f16{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(to_f32(f16{0xfc00}), -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace rf
