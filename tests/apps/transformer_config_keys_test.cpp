// verl's override_transformer_config spellings of the pipeline, recompute and optimizer-memory keys
// (apps/rlforge/transformer_config_keys.h): moved into each role's megatron block from the file and from overrides,
// the block's other keys and the section's other keys left alone, and a key given both ways with different values
// refused naming both spellings.
#include "apps/rlforge/transformer_config_keys.h"

#include <gtest/gtest.h>

#include "config/yaml_util.h"
#include "core/error.h"
#include "support/test_support.h"

namespace rf::apps {
namespace {

using rf::testing::expect_config_error;

std::string at(const config::ConfigTree& tree, const std::string& key) { return config::flow_yaml(tree.node(key)); }

TEST(TransformerConfigKeys, TheFilesSpellingsMoveIntoEachRolesMegatronBlock) {
  config::ConfigTree tree = config::ConfigTree::from_string(R"(
actor_rollout_ref:
  actor:
    megatron:
      pipeline_model_parallel_size: 4
      override_transformer_config: {noop_layers: [30, 31], recompute_granularity: selective, recompute_modules: [mlp],
                                    recompute_activation_function: true, apply_rope_fusion: true}
  ref:
    megatron: {override_transformer_config: {num_layers_in_first_pipeline_stage: 7, swap_optimizer: true,
                                             moe_tp_extend_ep: true}}
critic:
  megatron:
    override_transformer_config: {account_for_embedding_in_pipeline_split: true,
                                  account_for_loss_in_pipeline_split: true, reuse_fp32_param: true}
reward_model:
  megatron:
    override_transformer_config: {pipeline_model_parallel_layout: "Et|tL", microbatch_group_size_per_vp_stage: 4}
)", "test.yaml");
  move_transformer_config_keys(tree);
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.noop_layers"), "[30, 31]");
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.recompute_granularity"), "selective");
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.recompute_modules"), "[mlp]");
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.recompute_activation_function"), "true");
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"), "4");
  // The section keeps what rlforge does not read (rl_config_policy.h checks it against verl's default).
  EXPECT_EQ(at(tree, "actor_rollout_ref.actor.megatron.override_transformer_config"), "{apply_rope_fusion: true}");
  EXPECT_EQ(at(tree, "actor_rollout_ref.ref.megatron.num_layers_in_first_pipeline_stage"), "7");
  EXPECT_EQ(at(tree, "actor_rollout_ref.ref.megatron.swap_optimizer"), "true");
  EXPECT_EQ(at(tree, "actor_rollout_ref.ref.megatron.moe_tp_extend_ep"), "true");
  EXPECT_EQ(at(tree, "critic.megatron.reuse_fp32_param"), "true");
  EXPECT_EQ(at(tree, "critic.megatron.account_for_embedding_in_pipeline_split"), "true");
  EXPECT_EQ(at(tree, "critic.megatron.account_for_loss_in_pipeline_split"), "true");
  EXPECT_EQ(at(tree, "reward_model.megatron.pipeline_model_parallel_layout"), "Et|tL");
  EXPECT_EQ(at(tree, "reward_model.megatron.microbatch_group_size_per_vp_stage"), "4");
  EXPECT_EQ(at(tree, "reward_model.megatron.override_transformer_config"), "{}");
}

TEST(TransformerConfigKeys, AKeyGivenBothWaysInTheFileMustAgree) {
  const std::string file = R"(
actor_rollout_ref:
  actor:
    megatron:
      num_layers_in_last_pipeline_stage: {}
      override_transformer_config: {{num_layers_in_last_pipeline_stage: 6}}
)";
  config::ConfigTree same = config::ConfigTree::from_string(fmt::format(fmt::runtime(file), "6.0"), "test.yaml");
  move_transformer_config_keys(same);
  EXPECT_EQ(at(same, "actor_rollout_ref.actor.megatron.num_layers_in_last_pipeline_stage"), "6");
  config::ConfigTree differ = config::ConfigTree::from_string(fmt::format(fmt::runtime(file), "5"), "test.yaml");
  expect_config_error([&] { move_transformer_config_keys(differ); },
                      "actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_last_pipeline_stage",
                      "6 differs from actor_rollout_ref.actor.megatron.num_layers_in_last_pipeline_stage = 5: the two "
                      "spellings set one key; give it once");
}

TEST(TransformerConfigKeys, OverridesOfEitherSpellingSetTheMegatronKey) {
  const std::vector<std::string> moved = move_transformer_config_overrides(
      {"+actor_rollout_ref.actor.megatron.override_transformer_config.noop_layers=[30, 31]",
       "critic.megatron.override_transformer_config.pipeline_model_parallel_layout=Et|tL",
       "actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion=true",
       "critic.megatron.override_transformer_config.recompute_modules=[core_attn]",
       "critic.megatron.pipeline_model_parallel_layout=Et|tL", "trainer.total_training_steps=3",
       "critic.megatron.override_transformer_config.swap_optimizer=true"});
  EXPECT_EQ(moved, (std::vector<std::string>{
                       "++actor_rollout_ref.actor.megatron.noop_layers=[30, 31]",
                       "++critic.megatron.pipeline_model_parallel_layout=Et|tL",
                       "actor_rollout_ref.actor.megatron.override_transformer_config.apply_rope_fusion=true",
                       "++critic.megatron.recompute_modules=[core_attn]",
                       "critic.megatron.pipeline_model_parallel_layout=Et|tL", "trainer.total_training_steps=3",
                       "++critic.megatron.swap_optimizer=true"}));
  // The same key in both spellings: the same value (as YAML) is one setting, another value an error.
  EXPECT_NO_THROW(move_transformer_config_overrides({"reward_model.megatron.noop_layers=[1,2]",
                                                     "+reward_model.megatron.override_transformer_config.noop_layers=[1, 2]"}));
  expect_config_error(
      [&] {
        move_transformer_config_overrides({"reward_model.megatron.noop_layers=[1]",
                                           "+reward_model.megatron.override_transformer_config.noop_layers=[2]"});
      },
      "reward_model.megatron.override_transformer_config.noop_layers",
      "[2] differs from reward_model.megatron.noop_layers = [1]");
}

}  // namespace
}  // namespace rf::apps
