// NaiveRollout: the rollout engine's oracle (issue #7). No batching, no paging: one sequence at a
// time, its keys and values in one contiguous block, and every token recomputed from the start of the
// sequence at every step. It shares the engine's model forward and draw (draw_rollout_token), so with
// batch-invariant kernels the engine must return exactly its tokens and log-probs, whatever the
// engine's scheduling, preemption or prefix sharing did.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/rollout/rollout_request.h"
#include "model/causal_lm.h"

namespace rf::engine::rollout {

class NaiveRollout {
 public:
  // `weights` (laid out for `parallel`'s TP rank) are kept by reference.
  NaiveRollout(const model::ModelConfig& config, const model::ParamStore& weights,
               const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel, int64_t max_model_len);

  // As RolloutEngine::generate.
  std::vector<RolloutSample> generate(const std::vector<RolloutRequest>& requests, const RolloutSamplingParams& params,
                                      std::span<const int64_t> eos_ids, int64_t num_candidates);

 private:
  model::ModelConfig config_;
  int64_t max_model_len_;
  std::unique_ptr<model::CausalLm> model_;
  std::vector<Tensor> keys_, values_;  // per layer: one block of max_model_len tokens
};

}  // namespace rf::engine::rollout
