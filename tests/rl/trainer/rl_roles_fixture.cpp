#include "rl_roles_fixture.h"

#include "rl/trainer/rl_roles.h"
#include "engine/engine_fixture.h"

namespace rf::rl::testing {

model::ModelConfig tiny_model() { return engine_testing::tiny_config(model::Arch::qwen3); }

RlConfig grpo_config(std::optional<int64_t> log_prob_micro_batch) {
  RlConfig c;
  c.algorithm.adv_estimator = "grpo";
  c.actor_rollout_ref.actor.loss.use_kl_loss = false;
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

RlBatch old_log_probs(dist::ProcessGroup& group, std::optional<int64_t> log_prob_micro_batch) {
  const RlConfig config = grpo_config(log_prob_micro_batch);
  MemoryTracker tracker;
  RlRoles roles(config, tiny_model(), group, tracker);
  roles.actor().init_random_weights(3);
  RlBatch batch = eight_responses();
  roles.compute_log_prob(batch);
  return batch;
}

}  // namespace rf::rl::testing
