// DAPO's overlong reward shaping (verl's reward manager `dapo`, spec verl.md §6.2): a response longer
// than max_resp_len - len tokens loses penalty_factor per `len` tokens beyond that, linearly, so one of
// max_resp_len tokens loses penalty_factor:
//   reward += min(-(length - (max_resp_len - len)) / len * penalty_factor, 0)
// `length` counts the response's tokens, its eos included (verl's valid response length).
#pragma once

#include <cstdint>

namespace rf::rl {

struct OverlongBufferConfig {  // reward_model.reward_kwargs.overlong_buffer_cfg
  bool enable = false;
  int64_t len = 0;              // the buffer: the last `len` tokens of max_resp_len
  double penalty_factor = 1.0;
  bool log = false;             // the penalty as reward extras (overlong_reward, overlong)
  int64_t max_resp_len = 0;     // reward_model.reward_kwargs.max_resp_len
};

// The (non-positive) reward added to a response of `length` tokens.
double overlong_reward(int64_t length, const OverlongBufferConfig& config);

}  // namespace rf::rl
