// `rlforge train`'s layout check (rl/trainer/rl_layout.h) for the pipeline keys (issue #22 acceptance 5): each
// megatron role's split checked against its own model's config.json, keyed by the role's full key and naming the
// file; a role without pipeline keys not reading its model; an actor's or critic's update cut by count checked
// against the interleaved schedule, one cut by tokens not. The TP and DP rules against the world are e2e
// (train_config_errors, grpo_placement).
#include "rl/trainer/rl_layout.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"

namespace rf::rl {
namespace {

using rf::testing::expect_config_error;

class RlLayoutTest : public rf::testing::ScratchFolderTest {
 protected:
  // A folder with a config.json of `num_layers` layers.
  std::string model(const std::string& name, int64_t num_layers) {
    std::filesystem::create_directories(path(name));
    std::ofstream(path(name + "/config.json")) << fmt::format(
        R"({{"model_type": "qwen3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 24,
             "num_hidden_layers": {}, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4}})",
        num_layers);
    return path(name);
  }

  // GRPO without a KL term (the actor alone) on a 4-layer policy: 4 prompts x 2 responses per step and per
  // mini-batch, the mini-batch in micro-batches of 2.
  RlConfig grpo() {
    RlConfig config;
    config.algorithm.adv_estimator = "grpo";
    config.actor_rollout_ref.model.path = model("policy", 4);
    config.data.train_batch_size = 4;
    config.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
    config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2;
    config.actor_rollout_ref.rollout.sampling.n = 2;
    return config;
  }
};

TEST_F(RlLayoutTest, TheRolesAreThoseTheRunBuilds) {
  RlConfig config = grpo();
  auto names = [&] {
    std::vector<std::string> out;
    for (const MegatronRole& role : megatron_roles(config)) out.push_back(role.name + ":" + role.model_dir);
    return out;
  };
  const std::string policy = path("policy");
  EXPECT_EQ(names(), (std::vector<std::string>{"actor:" + policy}));
  config.actor_rollout_ref.actor.loss.use_kl_loss = true;
  config.algorithm.adv_estimator = "gae";
  config.reward_model.enable = true;
  config.reward_model.model.path = model("rm", 3);
  EXPECT_EQ(names(), (std::vector<std::string>{"actor:" + policy, "ref:" + policy, "critic:" + policy,
                                               "reward_model:" + path("rm")}));
  config.critic.model.path = model("critic", 3);
  EXPECT_EQ(megatron_roles(config)[2].model_dir, path("critic"));
  EXPECT_TRUE(megatron_roles(config)[2].trains);
  EXPECT_FALSE(megatron_roles(config)[3].trains);
}

TEST_F(RlLayoutTest, EachRolesSplitIsCheckedAgainstItsOwnModel) {
  RlConfig config = grpo();
  config.actor_rollout_ref.actor.megatron.pipeline_model_parallel_size = 2;
  check_rl_layout(config, 2);
  config.actor_rollout_ref.actor.megatron.pipeline_split.noop_layers = {7};
  expect_config_error([&] { check_rl_layout(config, 2); }, "actor_rollout_ref.actor.megatron.noop_layers",
                      "index 7 out of range [0, 5) (4 layers + 1 noop) in " + path("policy") + "/config.json");

  config = grpo();
  config.actor_rollout_ref.actor.loss.use_kl_loss = true;
  config.actor_rollout_ref.ref.megatron.pipeline_split.pipeline_model_parallel_layout = "Ett|ttL";
  expect_config_error([&] { check_rl_layout(config, 1); }, "actor_rollout_ref.ref.megatron.pipeline_model_parallel_layout",
                      "2 virtual stages need pipeline_model_parallel_size > 1");

  config = grpo();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = model("critic", 3);  // the actor's 4 layers would divide
  config.critic.megatron.pipeline_model_parallel_size = 2;
  expect_config_error([&] { check_rl_layout(config, 2); }, "critic.megatron.pipeline_model_parallel_size",
                      "2 does not divide the 3 layers (noop_layers can pad them) in " + path("critic") + "/config.json");

  config = grpo();
  config.reward_model.enable = true;
  config.reward_model.model.path = model("rm", 3);
  config.reward_model.megatron.pipeline_model_parallel_size = 2;
  config.reward_model.megatron.pipeline_split.num_layers_in_first_pipeline_stage = 4;
  expect_config_error([&] { check_rl_layout(config, 2); }, "reward_model.megatron.num_layers_in_first_pipeline_stage",
                      "4 layers exceed the model's 3");
}

TEST_F(RlLayoutTest, AModelIsReadOnlyForARoleWithPipelineKeys) {
  RlConfig config = grpo();
  config.algorithm.adv_estimator = "gae";
  config.critic.model.path = path("absent");  // the run opens it later, with its own message
  check_rl_layout(config, 1);
  config.critic.megatron.pipeline_split.noop_layers = {0};
  EXPECT_THROW(check_rl_layout(config, 1), IoError);
}

TEST_F(RlLayoutTest, AnInterleavedUpdateIsCheckedAgainstItsMicroBatches) {
  RlConfig config = grpo();
  engine::EngineConfig& actor = config.actor_rollout_ref.actor.megatron;
  actor.pipeline_model_parallel_size = 2;
  actor.pipeline_split.virtual_pipeline_model_parallel_size = 2;
  check_rl_layout(config, 2);  // a mini-batch of 8 responses in 4 micro-batches, N = P = 2
  // On 4 ranks DP is 2: a share of 4 responses, 2 micro-batches; N = 3 does not fit.
  actor.microbatch_group_size_per_vp_stage = 3;
  expect_config_error([&] { check_rl_layout(config, 4); },
                      "actor_rollout_ref.actor.megatron.microbatch_group_size_per_vp_stage",
                      "3 must lie in [pipeline_model_parallel_size = 2, num_microbatches = 2]; an update has 2 "
                      "micro-batches per data-parallel rank (actor_rollout_ref.actor.ppo_mini_batch_size 4 x rollout.n "
                      "2 responses over 2 data-parallel ranks, actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu 2)");
  actor.microbatch_group_size_per_vp_stage.reset();
  config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu.reset();  // the share in one micro-batch
  expect_config_error([&] { check_rl_layout(config, 2); },
                      "actor_rollout_ref.actor.megatron.microbatch_group_size_per_vp_stage",
                      "an update has 1 micro-batches per data-parallel rank (actor_rollout_ref.actor.ppo_mini_batch_size "
                      "4 x rollout.n 2 responses over 1 data-parallel ranks, "
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu null: the share in one)");
  config.actor_rollout_ref.actor.use_dynamic_bsz = true;  // the data decides the count: not checked here
  check_rl_layout(config, 2);

  config = grpo();
  config.algorithm.adv_estimator = "gae";
  config.critic.megatron.pipeline_model_parallel_size = 2;
  config.critic.megatron.pipeline_split.virtual_pipeline_model_parallel_size = 2;
  config.critic.ppo_micro_batch_size_per_gpu = 8;
  expect_config_error([&] { check_rl_layout(config, 2); }, "critic.megatron.microbatch_group_size_per_vp_stage",
                      "critic.ppo_micro_batch_size_per_gpu 8)");
}

}  // namespace
}  // namespace rf::rl
