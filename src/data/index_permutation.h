// IndexPermutation: a pseudo-random bijection of [0, size) that is computed, not stored, so a data
// order or a train/val split of a space of 10^18 problems costs no memory and any position can be
// looked up alone (resume, DP sharding). It is a 4-round balanced Feistel network (Luby-Rackoff) on
// the smallest even number of bits covering `size`, with Philox as the round function, and cycle
// walking: a value that lands outside [0, size) is encrypted again until it lands inside, which keeps
// the map a bijection of [0, size). Since that bit domain is < 4 * size, a lookup walks < 4 times
// on average.
#pragma once

#include <cstdint>

namespace rf::data {

class IndexPermutation {
 public:
  // size >= 1; `key` selects the permutation.
  IndexPermutation(uint64_t size, uint64_t key);

  uint64_t forward(uint64_t x) const;  // x in [0, size)
  uint64_t inverse(uint64_t y) const;  // inverse(forward(x)) == x
  uint64_t size() const { return size_; }

 private:
  uint32_t round_function(int round, uint64_t half) const;
  uint64_t encrypt(uint64_t x) const;
  uint64_t decrypt(uint64_t y) const;

  uint64_t size_;
  uint64_t key_;
  int half_bits_;
  uint64_t half_mask_;
};

}  // namespace rf::data
