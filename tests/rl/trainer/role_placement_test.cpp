// Role placement (rl/trainer/role_placement.h): device_mapping in both of ROLL's forms, the reference
// following the actor, and each refusal naming its key (the value forms themselves: roll_config_test.cpp).
#include "rl/trainer/role_placement.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace rf::rl {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RolePlacement, TheReferenceFollowsTheActorAndEveryRankNeedsARole) {
  RlConfig config;
  config.actor_rollout_ref.actor.device_mapping = YAML::Load("[0, 1]");
  config.actor_rollout_ref.rollout.device_mapping = YAML::Load("'list(range(2,4))'");
  const RolePlacement p = role_placement(config, 4);
  EXPECT_EQ(p.actor, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.rollout, (std::vector<int>{2, 3}));
  EXPECT_EQ(p.ref, (std::vector<int>{0, 1}));

  config.actor_rollout_ref.rollout.device_mapping = YAML::Load("[2]");
  EXPECT_NE(error_of([&] { role_placement(config, 4); }).find("rank 3 of the 4 has no role"), std::string::npos);
  config.actor_rollout_ref.rollout.device_mapping = YAML::Load("[2, 3, 4]");
  EXPECT_NE(error_of([&] { role_placement(config, 4); }).find("rank 4 is outside the world of 4 ranks"),
            std::string::npos);
  config.actor_rollout_ref.rollout.device_mapping = YAML::Load("[2, 3]");
  config.actor_rollout_ref.actor.device_mapping = YAML::Load("[0]");
  config.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2;
  EXPECT_NE(error_of([&] { role_placement(config, 4); }).find("1 ranks cannot hold TP groups of 2"), std::string::npos);
  config.actor_rollout_ref.actor.device_mapping = YAML::Load("'list(range(3,3))'");
  EXPECT_NE(error_of([&] { role_placement(config, 4); }).find("names no rank"), std::string::npos);
}

}  // namespace
}  // namespace rf::rl
