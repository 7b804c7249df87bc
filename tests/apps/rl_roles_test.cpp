// RlRoles' stages without the binary: the old-log-prob pass cuts its micro-batches by
// rollout.log_prob_micro_batch_size_per_gpu (verl; ROLL's actor_train.infer_batch_size), not by the
// training micro-batch (issue #20, defect 1), and in deterministic mode gives the same bits whatever the
// cut. (The engine reserves activations for its largest micro-batch up front, so memory does not show
// the cut.)
#include "apps/rlforge/rl_roles.h"

#include <gtest/gtest.h>

#include "dist/process_group.h"

namespace rf::apps {
namespace {

model::ModelConfig tiny_model() {
  model::ModelConfig c;
  c.arch = model::Arch::qwen3;
  c.vocab_size = 20;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.qk_norm = true;
  c.initializer_range = 0.2;
  return c;
}

// GRPO without a reference: 4 prompts x 2 responses, one mini-batch trained in one micro-batch of 8.
RlConfig grpo_config(std::optional<int64_t> log_prob_micro_batch) {
  RlConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.actor.use_kl_loss = false;
  c.data.train_batch_size = 4;
  c.data.max_prompt_length = 4;
  c.data.max_response_length = 6;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.actor.megatron.dtype = "float32";
  c.actor_rollout_ref.rollout.n = 2;
  c.actor_rollout_ref.rollout.dtype = "float32";
  c.actor_rollout_ref.rollout.kv_cache_bytes = 1 << 20;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = log_prob_micro_batch;
  c.trainer.total_training_steps = 1;
  c.trainer.deterministic = true;
  return c;
}

RlBatch eight_responses() {
  RlBatch batch;
  for (int64_t i = 0; i < 8; ++i) {
    RlResponse r;
    r.group = i / 2;
    r.prompt = {1, 2 + i % 3, 3};
    for (int64_t t = 0; t < 2 + i % 5; ++t) r.response.push_back(4 + (i * 7 + t * 3) % 15);
    batch.push_back(std::move(r));
  }
  return batch;
}

RlBatch old_log_probs(std::optional<int64_t> log_prob_micro_batch) {
  const RlConfig config = grpo_config(log_prob_micro_batch);
  dist::SingleProcessGroup world("world");
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), world, tracker);
  roles.actor().init_random_weights(3);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  return batch;
}

TEST(RlRoles, TheOldLogProbPassCutsByTheLogProbMicroBatch) {
  RolloutSection rollout;
  const MicroBatching training{.responses = 8, .max_tokens = 0};
  EXPECT_EQ(old_log_prob_batching(rollout, training).responses, 8);  // null: the training micro-batch
  rollout.log_prob_micro_batch_size_per_gpu = 2;
  EXPECT_EQ(old_log_prob_batching(rollout, training).responses, 2);
  EXPECT_EQ(old_log_prob_batching(rollout, {.responses = 8, .max_tokens = 512}).max_tokens, 512);
}

TEST(RlRoles, OldLogProbsAreTheSameBitsWhateverTheCut) {
  const RlBatch whole = old_log_probs(std::nullopt);  // the training micro-batch: all 8 at once
  const RlBatch by_two = old_log_probs(2);
  // Random weights: the log-probs differ from token to token (not the uniform -log 20 of zero weights).
  EXPECT_NE(whole[0].old_log_probs[0], whole[0].old_log_probs[1]);
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(whole[i].old_log_probs.size(), whole[i].response.size());
    EXPECT_EQ(by_two[i].old_log_probs, whole[i].old_log_probs) << "response " << i;
    EXPECT_EQ(by_two[i].entropy, whole[i].entropy) << "response " << i;
  }
}

}  // namespace
}  // namespace rf::apps
