// What the RlRoles tests build roles from: a tiny Qwen3 model (and the same backbone as a value model and as a
// one-label reward model, written as HF folders), a GRPO config of 4 prompts x 2 responses in deterministic
// mode, four prompts, and eight responses of 2 to 6 tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_roles.h"
#include "dist/process_group.h"
#include "model/model_config.h"

namespace rf::rl::testing {

// The engine tests' tiny Qwen3 (tests/engine/engine_fixture.h): vocabulary 20, hidden 16, 2 layers.
model::ModelConfig tiny_model();
// GRPO without a reference: one mini-batch of 8 responses, trained in one micro-batch of 8; the old-log-prob
// pass cut by `log_prob_micro_batch` responses (null: the training micro-batch). Every role computes in f32.
RlConfig grpo_config(std::optional<int64_t> log_prob_micro_batch = std::nullopt);
// Eight responses (two per prompt) of 2 to 6 tokens after 3-token prompts: unequal lengths, so balanced DP
// shares differ from contiguous ones.
RlBatch eight_responses();
// eight_responses() after RlRoles' old-log-prob pass over `group` (every role on every rank), the actor's
// weights drawn from seed 3.
RlBatch old_log_probs(dist::ProcessGroup& group, std::optional<int64_t> log_prob_micro_batch = std::nullopt);

// The four prompts of grpo_config's step, of 2 to 4 tokens (ids < 20).
std::vector<RlPrompt> four_prompts();
// The rollout's sampling for grpo_config: its n, temperature 1, max_tokens = its response length.
engine::rollout::RolloutSamplingParams sampling(const RlConfig& config, uint64_t seed = 11);
inline constexpr int64_t kEos = 2;
inline constexpr int64_t kNumCandidates = 20;  // the whole vocabulary

// tiny_model() under `head` (lm; value: *ForTokenClassification; score: *ForSequenceClassification), one
// label, written to `dir` as an HF folder in f32 with weights drawn from `seed` (uniform in +-0.3, the norms
// 1). Returns the folder's model config.
model::ModelConfig write_tiny_folder(const std::string& dir, model::HeadKind head, uint64_t seed);

// +1 on every token of the even responses, -1 on the odd ones: the first sample of each prompt is the good one.
void set_advantages(RlBatch& batch);

// The f32 weights of a ParamStore, to compare before and after an update.
std::vector<float> weight_values(const model::ParamStore& params);

}  // namespace rf::rl::testing
