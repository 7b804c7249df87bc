// Helpers shared by the engine tests, LM and value engines alike: a tiny model config, the f32 engine
// and AdamW configs, what an engine runs on in one process, and four documents as micro-batches.
#pragma once

#include <utility>
#include <vector>

#include "engine/train_engine.h"

namespace rf::engine_testing {

// Vocabulary 20, hidden 16, 2 layers, 4 heads of 4 over 2 kv heads, FFN 24, initializer range 0.2;
// qwen2 with q/k/v biases, qwen3 with q/k norms; `head` on top of the backbone.
model::ModelConfig tiny_config(model::Arch arch = model::Arch::llama, model::HeadKind head = model::HeadKind::lm);

engine::EngineConfig f32_engine();
// AdamW at a constant `lr` (lr_decay_steps is set: no trainer supplies total_training_steps here).
optim::OptimConfig adam(double lr);

// The kernels, one-rank parallel context and memory tracker an engine is built on in a one-process test.
struct EngineEnv {
  kernels::KernelRegistry kernels;
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
};

// Four documents from bos 1 to eos 2 (ids < 20), of 5, 4, 7 and 3 tokens: 19 tokens, 15 of them with a
// next-token target.
inline const std::vector<std::vector<int64_t>> kDocs = {
    {1, 5, 7, 9, 2}, {1, 3, 3, 2}, {1, 8, 6, 4, 11, 12, 2}, {1, 19, 2}};

// `docs` packed into one micro-batch (make_micro_batch's columns).
engine::TensorMap micro_batch(const std::vector<std::vector<int64_t>>& docs);

// A step's micro-batches (TensorMaps are move-only, so no initializer lists).
template <class... Maps>
std::vector<engine::TensorMap> step(Maps&&... maps) {
  std::vector<engine::TensorMap> out;
  (out.push_back(std::forward<Maps>(maps)), ...);
  return out;
}

}  // namespace rf::engine_testing
