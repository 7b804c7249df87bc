// A whole model on this rank (its TP shard), its weights gathered from a TrainEngine whose pipeline stages each
// hold a part: what greedy decoding reads at PP > 1, where no rank holds the whole model (the RL rollout gets its
// copy the same way, through the weight sync). At PP 1 the engine's own model is whole and needs no copy.
#pragma once

#include "engine/train_engine.h"
#include "model/causal_lm.h"

namespace rf::engine {

class GenerationCopy {
 public:
  // Collective over the engine's TP and pipeline groups (TrainEngine::export_weights). Activations for up to
  // `max_tokens` tokens; no gradients.
  GenerationCopy(const TrainEngine& engine, const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                 MemoryTracker& tracker, int64_t max_tokens);
  model::CausalLm& model() { return model_; }

 private:
  model::ParamStore weights_;
  model::CausalLm model_;
};

}  // namespace rf::engine
