// RlTrainer: `rlforge train`, verl's RayPPOTrainer.fit on rlforge's engines (spec verl.md §2.3, DESIGN §5).
// One step: prompts (rl_prompt_source.h) -> repeat n -> gen (RolloutEngine) -> reward (rule scorer by data_source) ->
// old_log_prob (+ entropy) -> ref -> KL in reward -> advantages -> update_actor (mini-batches x ppo_epochs)
// -> weight sync into the rollout; validation every test_freq, checkpoints every save_freq.
#pragma once

#include <string>

#include "apps/rlforge/rl_config.h"
#include "dist/process_group.h"

namespace rf::apps {

struct RlSummary {
  int64_t steps_run = 0;
  int64_t final_step = 0;
  double first_val_score = -1;  // validation before training (or the first one)
  double final_val_score = -1;  // the last validation
  double train_seconds = 0;
};

// `resolved_yaml` is the config after overrides, written into the run folder. Collective over `world`.
RlSummary run_rl(const RlConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world);

}  // namespace rf::apps
