// xxhash64 against reference values from the xxHash library (libxxhash 0.8.1, XXH64): short inputs
// that take only the tail path, and lengths around the 32-byte stripe that exercise the four lanes,
// with seed 0 and a non-zero seed.
#include "checkpoint/xxhash64.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rf::checkpoint {
namespace {

TEST(Xxhash64, MatchesTheReferenceOnShortStrings) {
  const auto hash = [](const std::string& s, uint64_t seed = 0) { return xxhash64(s.data(), s.size(), seed); };
  EXPECT_EQ(xxhash64(nullptr, 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(hash("a"), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(hash("abc"), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(hash("xxhash"), 0x32dd38952c4bc720ull);
  EXPECT_EQ(hash("xxhash", 20141025), 0xb559b98d844e0635ull);
}

TEST(Xxhash64, MatchesTheReferenceAcrossStripeBoundaries) {
  std::vector<unsigned char> bytes(1024);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i);
  struct Case {
    size_t size;
    uint64_t seed0, seed_golden;  // seed 0, and seed 0x9E3779B97F4A7C15
  };
  const Case cases[] = {{31, 0xc346d2b59b4d8ee1ull, 0xf3da6d05709c035dull},
                        {32, 0xcbf59c5116ff32b4ull, 0xa1c89217e9d50750ull},
                        {33, 0x0c535d1acafb8eadull, 0xe6a3c00cd6e74075ull},
                        {63, 0xe26aa9e2a95f8e4full, 0x26a0acd772de057eull},
                        {64, 0xf7c67301db6713f0ull, 0x2589245e62a1969bull},
                        {100, 0x6ac1e58032166597ull, 0x3b97d91eba03e785ull},
                        {1000, 0x6ef436b00eba4078ull, 0xdb4568e0faaf632cull},
                        {1024, 0x6f3914f18fe4df57ull, 0x22d0f4503bcda26aull}};
  for (const Case& c : cases) {
    EXPECT_EQ(xxhash64(bytes.data(), c.size), c.seed0) << c.size;
    EXPECT_EQ(xxhash64(bytes.data(), c.size, 0x9E3779B97F4A7C15ull), c.seed_golden) << c.size;
  }
}

TEST(Xxhash64, EverySingleBitFlipChangesTheHash) {
  std::vector<unsigned char> bytes(77);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  const uint64_t clean = xxhash64(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      bytes[i] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_NE(xxhash64(bytes.data(), bytes.size()), clean) << "byte " << i << " bit " << bit;
      bytes[i] ^= static_cast<unsigned char>(1u << bit);
    }
  }
}

}  // namespace
}  // namespace rf::checkpoint
