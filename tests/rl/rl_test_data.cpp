#include "rl_test_data.h"

#include <algorithm>

#include "core/element_access.h"

namespace rf::testing {

Tensor random_response_mask(int64_t B, int64_t T, uint64_t seed) {
  Draws draws(seed);
  Tensor mask({B, T}, DType::f32);
  for (int64_t b = 0; b < B; ++b) {
    if (draws.uniform() < 0.12) continue;  // a fully masked row
    const int64_t length = 1 + draws.below(T);
    for (int64_t t = 0; t < length; ++t) {
      const bool hole = t > 0 && t + 1 < length && draws.uniform() < 0.2;
      mask.at<float>({b, t}) = hole ? 0.0f : 1.0f;
    }
  }
  return mask;
}

std::vector<int64_t> random_group_labels(int64_t B, int64_t min_group_size, uint64_t seed) {
  Draws draws(seed);
  std::vector<int64_t> labels;
  for (int64_t group = 0; int64_t(labels.size()) < B; ++group) {
    const int64_t left = B - int64_t(labels.size());
    int64_t size = std::max(min_group_size, 1 + draws.below(5));
    if (left - size < min_group_size) size = left;  // the rest would make a group too small
    for (int64_t i = 0; i < size; ++i) labels.push_back(1000 + 37 * group);
  }
  for (int64_t i = B - 1; i > 0; --i) std::swap(labels[size_t(i)], labels[size_t(draws.below(i + 1))]);
  return labels;
}

Tensor random_rewards(const Tensor& mask_BT, RewardKind kind, DType dtype, uint64_t seed) {
  Draws draws(seed);
  const int64_t B = mask_BT.size(0), T = mask_BT.size(1);
  Tensor rewards({B, T}, dtype);
  for (int64_t b = 0; b < B; ++b) {
    int64_t last_valid = T - 1;
    for (int64_t t = 0; t < T; ++t) {
      if (mask_BT.at<float>({b, t}) == 0.0f) continue;
      last_valid = t;
      if (kind == RewardKind::dense) store_f64(rewards, b * T + t, draws.uniform(-0.1, 0.1));
    }
    const double score = kind == RewardKind::binary ? double(draws.below(2)) : draws.uniform(-1.0, 2.0);
    store_f64(rewards, b * T + last_valid, load_f64(rewards, b * T + last_valid) + score);
  }
  return rewards;
}

}  // namespace rf::testing
