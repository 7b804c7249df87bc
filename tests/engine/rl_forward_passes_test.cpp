// TrainEngine's forward-only RL passes (compute_log_prob, compute_values: verl's on the actor and the
// critic) give what InferEngine gives on the same weights: the reference's and the reward model's passes
// and the actor's agree on a policy's numbers. With the batch-invariant registry (deterministic mode) the
// bits are equal.
#include <gtest/gtest.h>

#include "engine/infer_engine.h"
#include "engine/train_engine.h"
#include "engine_fixture.h"
#include "support/test_support.h"

namespace rf::engine {
namespace {

using engine_testing::adam;
using engine_testing::f32_engine;
using engine_testing::kDocs;
using engine_testing::micro_batch;
using engine_testing::step;

TEST(RlForwardPasses, TrainEngineLogProbsAndEntropyEqualInferEngines) {
  const kernels::KernelRegistry kernels(kernels::KernelConfig{.batch_invariant = true});
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  const model::ModelConfig config = engine_testing::tiny_config(model::Arch::qwen3);
  TrainEngine actor(f32_engine(), adam(1e-3), config, kernels, parallel, tracker, 64);
  actor.init_random_weights(5);
  InferEngine reference(f32_engine(), config, kernels, parallel, tracker, 64);
  actor.export_weights([&](const std::string& name, TensorView full) { reference.update_weights(name, full); });

  const double temperature = 0.7;
  const std::vector<TensorMap> ours = actor.compute_log_prob(step(micro_batch(kDocs)), temperature,
                                                             model::EntropyOutput::compute);
  const std::vector<TensorMap> theirs = reference.compute_log_prob(step(micro_batch(kDocs)), temperature,
                                                                   model::EntropyOutput::compute);
  ASSERT_EQ(ours.size(), 1u);
  rf::testing::expect_close(ours[0].get("log_probs"), theirs[0].get("log_probs"), 0, 0, "log_probs");
  rf::testing::expect_close(ours[0].get("entropy"), theirs[0].get("entropy"), 0, 0, "entropy");
  // A forward-only pass leaves no gradient behind: the next optimizer step has nothing to apply.
  EXPECT_EQ(actor.optimizer_step(), 0.0);
}

TEST(RlForwardPasses, TrainEngineValuesEqualInferEngines) {
  const kernels::KernelRegistry kernels(kernels::KernelConfig{.batch_invariant = true});
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  const model::ModelConfig config = engine_testing::tiny_config(model::Arch::qwen2, model::HeadKind::value);
  TrainEngine critic(f32_engine(), adam(1e-3), config, kernels, parallel, tracker, 64);
  critic.init_random_weights(6);
  InferEngine same(f32_engine(), config, kernels, parallel, tracker, 64);
  critic.export_weights([&](const std::string& name, TensorView full) { same.update_weights(name, full); });
  rf::testing::expect_close(critic.compute_values(step(micro_batch(kDocs)))[0].get("values"),
                            same.compute_values(step(micro_batch(kDocs)))[0].get("values"), 0, 0, "values");
}

}  // namespace
}  // namespace rf::engine
