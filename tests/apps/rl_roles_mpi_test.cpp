// RlRoles' stages under mpirun against one process: the actor on every rank (DP = the world), each DP rank
// computing its balanced share of the old-log-prob pass and the shares gathered to every rank, gives every
// response the bits one process gives it (deterministic mode's batch-invariant kernels).
#include <gtest/gtest.h>

#include "apps/rlforge/rl_roles.h"
#include "mpi_test_world.h"

namespace rf::apps {
namespace {

using dist::testing::world;

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

RlConfig grpo_config() {
  RlConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.actor.use_kl_loss = false;
  c.data.train_batch_size = 4;
  c.data.max_prompt_length = 4;
  c.data.max_response_length = 6;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 4;
  c.actor_rollout_ref.actor.megatron.dtype = "float32";
  c.actor_rollout_ref.rollout.n = 2;
  c.actor_rollout_ref.rollout.dtype = "float32";
  c.actor_rollout_ref.rollout.kv_cache_bytes = 1 << 20;
  c.trainer.total_training_steps = 1;
  c.trainer.deterministic = true;
  return c;
}

// Eight responses of 2 to 6 tokens: balanced DP shares differ from contiguous ones.
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

RlBatch old_log_probs(dist::ProcessGroup& group) {
  const RlConfig config = grpo_config();
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker);
  roles.actor().init_random_weights(3);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  return batch;
}

TEST(RlRolesMpi, OldLogProbsOverTheWorldEqualOneProcess) {
  dist::SingleProcessGroup alone("alone");
  const RlBatch one = old_log_probs(alone);
  const RlBatch many = old_log_probs(world());
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].old_log_probs.size(), one[i].response.size());
    EXPECT_EQ(many[i].old_log_probs, one[i].old_log_probs) << "response " << i << " on rank " << world().rank();
    EXPECT_EQ(many[i].entropy, one[i].entropy) << "response " << i << " on rank " << world().rank();
  }
}

}  // namespace
}  // namespace rf::apps
