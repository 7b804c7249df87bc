#include "rl/rewards/overlong_penalty.h"

#include <algorithm>

namespace rf::rl {

double overlong_reward(int64_t length, const OverlongBufferConfig& config) {
  const int64_t expected = config.max_resp_len - config.len;
  const double exceed = double(length - expected);
  return std::min(-exceed / double(config.len) * config.penalty_factor, 0.0);
}

}  // namespace rf::rl
