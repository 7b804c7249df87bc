// DAPO's overlong penalty against hand values (verl's DAPORewardManager arithmetic).
#include "rl/rewards/overlong_penalty.h"

#include <gtest/gtest.h>

namespace rf::rl {
namespace {

TEST(OverlongPenalty, LinearInTheBufferAndZeroBeforeIt) {
  // max_resp_len 20, buffer 8: up to 12 tokens free, then -factor/8 per token, -factor at 20.
  const OverlongBufferConfig c{.enable = true, .len = 8, .penalty_factor = 0.5, .log = false, .max_resp_len = 20};
  EXPECT_EQ(overlong_reward(1, c), 0.0);
  EXPECT_EQ(overlong_reward(12, c), 0.0);  // exceed 0: -0/8 -> min(-0, 0)
  EXPECT_DOUBLE_EQ(overlong_reward(13, c), -0.0625);
  EXPECT_DOUBLE_EQ(overlong_reward(16, c), -0.25);
  EXPECT_DOUBLE_EQ(overlong_reward(20, c), -0.5);
}

TEST(OverlongPenalty, ABufferAsLongAsTheResponseLimitPenalisesEveryToken) {
  const OverlongBufferConfig c{.enable = true, .len = 4, .penalty_factor = 1.0, .log = true, .max_resp_len = 4};
  EXPECT_DOUBLE_EQ(overlong_reward(1, c), -0.25);
  EXPECT_DOUBLE_EQ(overlong_reward(4, c), -1.0);
}

}  // namespace
}  // namespace rf::rl
