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
  int64_t max_resp_len = 0;     // not a key of this block: reward_model.reward_kwargs.max_resp_len

  template <class Fields>
  void fields(Fields& f) {
    f("enable", enable, "penalise responses that run into the last `len` tokens of max_resp_len");
    f("len", len, "the buffer's tokens");
    f("penalty_factor", penalty_factor, "the penalty of a response of max_resp_len tokens");
    f("log", log, "the penalty as reward extras overlong_reward and overlong (in the generation dumps)");
  }
  // ConfigError keyed relative to this block, when enabled: len not positive, penalty_factor below 0.
  void validate() const;
};

// The (non-positive) reward added to a response of `length` tokens.
double overlong_reward(int64_t length, const OverlongBufferConfig& config);

}  // namespace rf::rl
