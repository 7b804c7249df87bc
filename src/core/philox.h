// Counter-based RNG: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// A draw is a pure function of (seed, stream, offset), so results never depend on thread count or
// scheduling (DESIGN §10). The key is the 64-bit seed; the 128-bit counter is (offset, stream).
// Element i of a fill uses counter offset first_offset + i.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor_view.h"

namespace rf {

class Philox {
 public:
  Philox(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

  // The raw Philox4x32-10 block: counter words (c0, c1, c2, c3), key words (k0, k1).
  static std::array<uint32_t, 4> block(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

  std::array<uint32_t, 4> block_at(uint64_t offset) const;
  double uniform(uint64_t offset) const;  // [0, 1), 53 random bits
  double normal(uint64_t offset) const;   // standard normal by Box-Muller

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

// Fills every element (any floating dtype, any strides) with draws from the stream.
void fill_uniform(TensorView out, const Philox& rng, double low, double high, uint64_t first_offset = 0);
void fill_normal(TensorView out, const Philox& rng, double mean, double stddev, uint64_t first_offset = 0);

}  // namespace rf
