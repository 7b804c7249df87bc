// RlTrainer: `rlforge train`, verl's RayPPOTrainer.fit on rlforge's engines (spec verl.md §2.3, DESIGN §5).
// One step: prompts (rl_prompt_source.h) -> repeat n -> gen (RolloutEngine) -> reward (rule scorer by data_source) ->
// old_log_prob (+ entropy) -> ref -> KL in reward -> advantages -> update_actor (mini-batches x ppo_epochs)
// -> weight sync into the rollout; validation every test_freq, checkpoints every save_freq.
#pragma once

#include <memory>
#include <string>

#include "rl/trainer/rl_config.h"
#include "rl/trainer/rl_metrics.h"
#include "dist/process_group.h"
#include "trainer/run_loop.h"

namespace rf::rl {

struct RlSummary {
  int64_t steps_run = 0;
  int64_t final_step = 0;
  double first_val_score = -1;  // validation before training (or the first one)
  double final_val_score = -1;  // the last validation
  double train_seconds = 0;
};

// A validation's metrics are val-core/<data_source>/{acc,reward}/mean@n, val-aux/...; its score is the mean over
// data sources of their core variable: acc when the scorer returns it, else the reward.
using trainer::Validation;

// One RL run: the steps of trainer::run_loop. Every method is collective over the world.
class RlTrainer : public trainer::Trainable {
 public:
  // The thread pool, tokenizer, prompts and reward, the run folder with `resolved_yaml` (the config after
  // overrides), the roles on their ranks with the initial weights, and the GEMM peak MFU divides by.
  RlTrainer(const RlConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world);
  ~RlTrainer() override;

  // Loads the checkpoint trainer.resume_mode names, if any (RunFolder::resume_point), syncs the rollout and
  // only then writes the run folder's config.yaml; returns the step the run continues after (0: a fresh
  // run) and that step's saved metrics row.
  trainer::Resumed resume() override;
  // One training step, verl's stages in order, each timed (timing_s/<stage>); validation and checkpoints
  // are fit()'s, which knows which steps take them.
  Metrics step(int64_t step) override;
  // Generation on the validation prompts with rollout.val_kwargs, scored; `step` names the dumps.
  Validation validate(int64_t step) override;
  void save_checkpoint(int64_t step, const nlohmann::json& metrics_row) override;
  // perf/time_per_step, perf/throughput (the step's tokens over its whole time, per rank) and
  // training/global_step, as verl logs them.
  void finish_step(Metrics& metrics, int64_t step, double seconds) override;
  // run_loop over trainer.total_training_steps (or the time budget) with validation before training, then
  // the summary printed.
  RlSummary fit();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace rf::rl
