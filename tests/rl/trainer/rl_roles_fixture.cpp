#include "rl_roles_fixture.h"

#include <algorithm>

#include "core/philox.h"
#include "engine/engine_fixture.h"
#include "model/hf_folder.h"

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
  c.actor_rollout_ref.ref.megatron.dtype = "float32";
  c.critic.megatron.dtype = "float32";
  c.reward_model.megatron.dtype = "float32";
  c.actor_rollout_ref.rollout.sampling.n = 2;
  c.actor_rollout_ref.rollout.dtype = "float32";
  c.actor_rollout_ref.rollout.engine.kv_cache_bytes = 1 << 20;
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

std::vector<RlPrompt> four_prompts() {
  return {{{1, 5, 7}, "a"}, {{1, 9}, "b"}, {{1, 3, 3, 8}, "c"}, {{1, 12, 6}, "d"}};
}

engine::rollout::RolloutSamplingParams sampling(const RlConfig& config, uint64_t seed) {
  return train_sampling(config.actor_rollout_ref.rollout, config.response_length(), seed);
}

model::ModelConfig write_tiny_folder(const std::string& dir, model::HeadKind head, uint64_t seed) {
  model::ModelConfig config = engine_testing::tiny_config(model::Arch::qwen3, head);
  config.num_labels = 1;
  const model::HfModelFolder folder = model::HfModelFolder::for_config(config, DType::f32);
  model::ParamStore params(model::ParamLayout::for_model(folder.config), DType::f32);
  fill_uniform(params.flat(), Philox(seed, 0), -0.3, 0.3);
  for (const model::ParamEntry& e : params.layout().entries())
    if (e.name.ends_with("norm.weight")) {
      const TensorView w = params.get(e.name);
      std::fill_n(w.data<float>(), w.numel(), 1.0f);
    }
  model::write_hf_folder(dir, folder, params);
  return folder.config;
}

std::vector<float> weight_values(const model::ParamStore& params) {
  const TensorView flat = params.flat();
  return {flat.data<float>(), flat.data<float>() + flat.numel()};
}

void set_advantages(RlBatch& batch) {
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i].advantages.assign(batch[i].response.size(), i % 2 == 0 ? 1.0f : -1.0f);
}

}  // namespace rf::rl::testing
