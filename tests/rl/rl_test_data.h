// Random RL batches for the property tests, shaped like verl's: response masks with ragged lengths,
// interior holes (multi-turn observation tokens) and some fully masked rows; group labels with
// unequal groups in shuffled order; outcome rewards at the last valid token (at T-1 for a fully
// masked row, as verl's reward manager puts them), optionally with small dense per-token rewards.
//
// Dimension legend: B batch (responses), T response tokens.
#pragma once

#include <vector>

#include "core/philox.h"
#include "core/tensor.h"

namespace rf::testing {

// Successive uniform draws from one Philox stream.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed, 7) {}
  double uniform(double low = 0.0, double high = 1.0) { return low + (high - low) * rng_.uniform(next_++); }
  int64_t below(int64_t n) { return std::min<int64_t>(n - 1, int64_t(uniform() * double(n))); }

 private:
  Philox rng_;
  uint64_t next_ = 0;
};

enum class RewardKind : uint8_t { binary, continuous, dense };

Tensor random_response_mask(int64_t B, int64_t T, uint64_t seed);  // f32 0/1
// B labels in groups of at least `min_group_size` samples (one group when B is smaller).
std::vector<int64_t> random_group_labels(int64_t B, int64_t min_group_size, uint64_t seed);
Tensor random_rewards(const Tensor& mask_BT, RewardKind kind, DType dtype, uint64_t seed);

}  // namespace rf::testing
