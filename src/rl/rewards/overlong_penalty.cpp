#include "rl/rewards/overlong_penalty.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace rf::rl {

void OverlongBufferConfig::validate() const {
  if (!enable) return;
  if (len <= 0) throw ConfigError("len", fmt::format("must be positive, got {}", len));
  if (!(penalty_factor >= 0)) throw ConfigError("penalty_factor", fmt::format("must be >= 0, got {}", penalty_factor));
}

double overlong_reward(int64_t length, const OverlongBufferConfig& config) {
  const int64_t expected = config.max_resp_len - config.len;
  const double exceed = double(length - expected);
  return std::min(-exceed / double(config.len) * config.penalty_factor, 0.0);
}

}  // namespace rf::rl
