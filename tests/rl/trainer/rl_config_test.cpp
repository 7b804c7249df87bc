// The RL config's component-owned blocks, read through the binder as `rlforge train` reads them: each
// component (the rollout's sampling and engine, the critic's loss, the Python reward pool, DAPO's overlong
// buffer) binds its own keys, spliced where verl keeps them flat, and refuses a bad value with the full
// key path before any work, whether or not the component will run.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "config/bind.h"
#include "core/error.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_roles.h"

namespace rf {
namespace {

// A valid GRPO config on the built-in task, with `extra` (a YAML mapping) merged over it.
rl::RlConfig bind_with(const std::string& extra) {
  YAML::Node node = YAML::Load("{trainer: {total_training_steps: 2}, data: {train_batch_size: 4},"
                               " actor_rollout_ref: {actor: {ppo_mini_batch_size: 2}}}");
  const YAML::Node overrides = YAML::Load(extra);
  for (const auto& section : overrides) {
    YAML::Node target = node[section.first.Scalar()];
    for (const auto& entry : section.second) target[entry.first.Scalar()] = entry.second;
  }
  return config::bind<rl::RlConfig>(node, "");
}

std::string error_key(const std::string& extra) {
  try {
    bind_with(extra);
  } catch (const ConfigError& error) {
    return error.key_path();
  }
  return "(accepted)";
}

TEST(RlConfig, RolloutSamplingKeysBindIntoTheEnginesParams) {
  const rl::RlConfig c = bind_with(
      "{actor_rollout_ref: {rollout: {temperature: 0.7, top_k: 5, top_p: 0.9, n: 3, ignore_eos: true,"
      " val_kwargs: {temperature: 0.5, do_sample: true, n: 2}}}}");
  const auto train = rl::train_sampling(c.actor_rollout_ref.rollout, 7, 11);
  EXPECT_EQ(train.temperature, 0.7);
  EXPECT_EQ(train.top_k, 5);
  EXPECT_EQ(train.top_p, 0.9);
  EXPECT_EQ(train.n, 3);
  EXPECT_TRUE(train.ignore_eos);
  EXPECT_EQ(train.max_tokens, 7);
  EXPECT_EQ(train.seed, 11u);
  const auto val = rl::val_sampling(c.actor_rollout_ref.rollout, 7, 11);
  EXPECT_EQ(val.temperature, 0.5);
  EXPECT_TRUE(val.do_sample);
  EXPECT_EQ(val.n, 2);
  EXPECT_EQ(val.top_k, -1);       // val_kwargs' own default, not the rollout's 5
  EXPECT_TRUE(val.ignore_eos);    // the rollout's
  EXPECT_EQ(val.max_tokens, 7);
  // verl's val_kwargs defaults: greedy, one response.
  const auto val_default = rl::val_sampling(bind_with("{}").actor_rollout_ref.rollout, 7, 0);
  EXPECT_TRUE(val_default.greedy());
  EXPECT_EQ(val_default.n, 1);
}

TEST(RlConfig, RolloutEngineKeysBindIntoTheEnginesConfig) {
  const rl::RlConfig c = bind_with(
      "{actor_rollout_ref: {rollout: {block_size: 8, kv_cache_bytes: 4096, max_num_seqs: 3,"
      " max_num_batched_tokens: 64, enable_chunked_prefill: false}}}");
  const auto& engine = c.actor_rollout_ref.rollout.engine;
  EXPECT_EQ(engine.block_size, 8);
  EXPECT_EQ(engine.kv_cache_bytes, 4096);
  EXPECT_EQ(engine.limits.max_num_seqs, 3);
  EXPECT_EQ(engine.limits.max_num_batched_tokens, 64);
  EXPECT_FALSE(engine.limits.enable_chunked_prefill);
  EXPECT_TRUE(engine.enable_prefix_caching);  // verl's default, not the engine's own (off)
}

TEST(RlConfig, EachComponentRefusesItsBadValuesByFullKey) {
  const std::pair<std::string, std::string> cases[] = {
      {"{actor_rollout_ref: {rollout: {temperature: -1}}}", "actor_rollout_ref.rollout.temperature"},
      {"{actor_rollout_ref: {rollout: {top_k: -2}}}", "actor_rollout_ref.rollout.top_k"},
      {"{actor_rollout_ref: {rollout: {n: 0}}}", "actor_rollout_ref.rollout.n"},
      {"{actor_rollout_ref: {rollout: {val_kwargs: {top_p: 2}}}}", "actor_rollout_ref.rollout.val_kwargs.top_p"},
      {"{actor_rollout_ref: {rollout: {gpu_memory_utilization: 0}}}",
       "actor_rollout_ref.rollout.gpu_memory_utilization"},
      {"{actor_rollout_ref: {rollout: {max_num_seqs: 0}}}", "actor_rollout_ref.rollout.max_num_seqs"},
      {"{actor_rollout_ref: {rollout: {kv_cache_bytes: -5}}}", "actor_rollout_ref.rollout.kv_cache_bytes"},
      {"{actor_rollout_ref: {rollout: {name: vllm}}}", "actor_rollout_ref.rollout.name"},
      {"{actor_rollout_ref: {actor: {clip_ratio_high: -0.2}}}", "actor_rollout_ref.actor.clip_ratio_high"},
      {"{actor_rollout_ref: {actor: {clip_ratio_low: 1.0}}}", "actor_rollout_ref.actor.clip_ratio_low"},
      {"{actor_rollout_ref: {actor: {clip_ratio: -1, clip_ratio_low: null, clip_ratio_high: null}}}",
       "actor_rollout_ref.actor.clip_ratio"},
      {"{actor_rollout_ref: {actor: {loss_scale_factor: 0}}}", "actor_rollout_ref.actor.loss_scale_factor"},
      {"{actor_rollout_ref: {actor: {kl_loss_coef: -0.1}}}", "actor_rollout_ref.actor.kl_loss_coef"},
      // The critic is off (GRPO), and its loss's key is still checked.
      {"{critic: {cliprange_value: -0.5}}", "critic.cliprange_value"},
      {"{custom_reward_function: {num_workers: 0}}", "custom_reward_function.num_workers"},
      {"{custom_reward_function: {timeout_s: 0}}", "custom_reward_function.timeout_s"},
      {"{custom_reward_function: {on_error: ignore}}", "custom_reward_function.on_error"},
      {"{reward_model: {reward_manager: dapo, reward_kwargs: {max_resp_len: 8,"
       " overlong_buffer_cfg: {enable: true, len: 0}}}}",
       "reward_model.reward_kwargs.overlong_buffer_cfg.len"},
      {"{reward_model: {reward_manager: dapo, reward_kwargs: {overlong_buffer_cfg: {enable: true, len: 4}}}}",
       "reward_model.reward_kwargs.max_resp_len"},
  };
  for (const auto& [extra, key] : cases) EXPECT_EQ(error_key(extra), key) << extra;
}

TEST(RlConfig, DapoOverlongBufferIsTheRewardComponentsConfig) {
  const rl::RlConfig c = bind_with(
      "{reward_model: {reward_manager: dapo, reward_kwargs: {max_resp_len: 8,"
      " overlong_buffer_cfg: {enable: true, len: 4, penalty_factor: 0.5, log: true}}}}");
  const rl::OverlongBufferConfig buffer = c.overlong_buffer();
  EXPECT_TRUE(buffer.enable);
  EXPECT_EQ(buffer.len, 4);
  EXPECT_EQ(buffer.penalty_factor, 0.5);
  EXPECT_TRUE(buffer.log);
  EXPECT_EQ(buffer.max_resp_len, 8);
  EXPECT_EQ(rl::overlong_reward(8, buffer), -0.5);  // a response of max_resp_len tokens loses penalty_factor
}

}  // namespace
}  // namespace rf
