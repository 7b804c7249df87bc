// What the RlRoles tests build roles from: a tiny Qwen3 model, a GRPO config of 4 prompts x 2 responses in
// deterministic mode, and eight responses of 2 to 6 tokens.
#pragma once

#include <cstdint>
#include <optional>

#include "rl/trainer/rl_batch.h"
#include "rl/trainer/rl_config.h"
#include "dist/process_group.h"
#include "model/model_config.h"

namespace rf::rl::testing {

// The engine tests' tiny Qwen3 (tests/engine/engine_fixture.h): vocabulary 20, hidden 16, 2 layers.
model::ModelConfig tiny_model();
// GRPO without a reference: one mini-batch of 8 responses, trained in one micro-batch of 8; the old-log-prob
// pass cut by `log_prob_micro_batch` responses (null: the training micro-batch).
RlConfig grpo_config(std::optional<int64_t> log_prob_micro_batch = std::nullopt);
// Eight responses (two per prompt) of 2 to 6 tokens after 3-token prompts: unequal lengths, so balanced DP
// shares differ from contiguous ones.
RlBatch eight_responses();
// eight_responses() after RlRoles' old-log-prob pass over `group` (every role on every rank), the actor's
// weights drawn from seed 3.
RlBatch old_log_probs(dist::ProcessGroup& group, std::optional<int64_t> log_prob_micro_batch = std::nullopt);

}  // namespace rf::rl::testing
