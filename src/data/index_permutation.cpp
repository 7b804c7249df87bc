#include "data/index_permutation.h"

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/philox.h"

namespace rf::data {
namespace {

constexpr int kNumRounds = 4;

}  // namespace

IndexPermutation::IndexPermutation(uint64_t size, uint64_t key) : size_(size), key_(key) {
  RF_CHECK(size >= 1, "IndexPermutation: size must be at least 1");
  const int bits = std::bit_width(size - 1);  // values 0..size-1 fit in `bits` bits
  half_bits_ = std::max(1, (bits + 1) / 2);
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
}

uint32_t IndexPermutation::round_function(int round, uint64_t half) const {
  return Philox(key_, uint64_t(round)).block_at(half)[0];
}

// One Feistel round maps (left, right) to (right, left ^ F(right)); decryption undoes the rounds
// in reverse order.
uint64_t IndexPermutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int round = 0; round < kNumRounds; ++round) {
    const uint64_t next_right = (left ^ round_function(round, right)) & half_mask_;
    left = right;
    right = next_right;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::decrypt(uint64_t y) const {
  uint64_t left = y >> half_bits_, right = y & half_mask_;
  for (int round = kNumRounds - 1; round >= 0; --round) {
    const uint64_t previous_left = (right ^ round_function(round, left)) & half_mask_;
    right = left;
    left = previous_left;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::forward(uint64_t x) const {
  RF_CHECK(x < size_, "IndexPermutation: index {} outside [0, {})", x, size_);
  do x = encrypt(x);
  while (x >= size_);
  return x;
}

uint64_t IndexPermutation::inverse(uint64_t y) const {
  RF_CHECK(y < size_, "IndexPermutation: value {} outside [0, {})", y, size_);
  do y = decrypt(y);
  while (y >= size_);
  return y;
}

}  // namespace rf::data
