// Value models under tensor parallel (with and without sequence parallel) against one rank: a critic
// (value head) and a reward model (score head) trained 3 steps on a squared error by a TrainEngine at
// TP = world size and by a one-rank TrainEngine on every rank, as tp_equivalence_mpi_test.cpp does for
// the LM. The replicated score (model/value_head.h) must give the one-rank values at every token, the
// same loss and gradients every step, and the same weights after the third.
// Legend: N tokens.
#include <gtest/gtest.h>

#include <cmath>

#include "dist/parallel_context.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;

// Mean squared error of the values against a return fixed by each token's id, over the step's loss tokens.
engine::LossOutput squared_error(const engine::TensorMap& mb, const model::ModelOutputs& out,
                                 const engine::LossContext& ctx, const model::OutputGrads& grads) {
  const TensorView mask = mb.get("loss_mask"), tokens = mb.get("input_ids");
  engine::LossOutput result;
  for (int64_t n = 0; n < mask.numel(); ++n) {
    const double m = load_f64(mask, n) / double(ctx.global_num_tokens);
    const double error = load_f64(out.values_N, n) - 0.5 * double(int64_t(load_f64(tokens, n)) % 3 - 1);
    result.loss += m * error * error;
    grads.dvalues_N.data<float>()[n] = float(2.0 * m * error);
  }
  return result;
}

void check_value_model_tp(model::HeadKind head, bool sp) {
  SCOPED_TRACE(model::head_name(head) + (sp ? " +SP" : ""));
  model::ModelConfig config = parallel_testing::small_model_config(model::Arch::qwen2, true, world().size(), 2);
  config.head = head;
  dist::ParallelDims dims;
  dims.world_size = world().size();
  dims.tensor_model_parallel_size = world().size();
  dist::ParallelContext tp_context = dist::ParallelContext::create(dist::RankLayout(dims), world(), sp);
  dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  engine::EngineConfig tp_engine_config;
  tp_engine_config.dtype = "float32";
  tp_engine_config.tensor_model_parallel_size = world().size();
  tp_engine_config.sequence_parallel = sp;
  engine::EngineConfig one_engine_config = tp_engine_config;
  one_engine_config.tensor_model_parallel_size = 1;
  one_engine_config.sequence_parallel = false;
  optim::OptimConfig optim;
  optim.lr = 1e-4;  // tp_equivalence_mpi_test.cpp says why
  optim.lr_decay_steps = 100;
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine parallel(tp_engine_config, optim, config, kernels, tp_context, tracker, 64);
  engine::TrainEngine single(one_engine_config, optim, config, kernels, one_rank, tracker, 64);
  parallel.init_random_weights(3);
  single.init_random_weights(3);

  // Forward only: every token's value, on every rank (13 and 12 tokens: SP pads the first).
  const auto values_tp = parallel.forward_backward(parallel_testing::step_micro_batches(0, 0, 2), squared_error,
                                                   engine::ForwardOnly::yes);
  const auto values_one = single.forward_backward(parallel_testing::step_micro_batches(0, 0, 2), squared_error,
                                                  engine::ForwardOnly::yes);
  for (size_t m = 0; m < 2; ++m) {
    const TensorView a = values_tp.outputs[m].get("values"), b = values_one.outputs[m].get("values");
    ASSERT_EQ(a.numel(), b.numel());
    for (int64_t n = 0; n < a.numel(); ++n) EXPECT_NEAR(load_f64(a, n), load_f64(b, n), 1e-5) << "token " << n;
  }
  for (int step = 0; step < 3; ++step) {
    auto step_loss = [&](engine::TrainEngine& trainer) {
      return trainer.forward_backward(parallel_testing::step_micro_batches(step, 0, 2), squared_error,
                                      engine::ForwardOnly::no)
          .loss;
    };
    const double loss_tp = step_loss(parallel), loss_one = step_loss(single);
    EXPECT_NEAR(loss_tp, loss_one, 1e-5 * std::abs(loss_one)) << "step " << step;
    parallel.reduce_gradients();
    single.reduce_gradients();
    parallel_testing::expect_params_match(parallel.grads().layout(), parallel.grads().flat(), single.grads(),
                                          tp_context.tp(), "step " + std::to_string(step) + " grads");
    parallel.optimizer_step();
    single.optimizer_step();
  }
  parallel_testing::expect_params_match(parallel.master_weights().layout(), parallel.master_weights().flat(),
                                        single.master_weights(), tp_context.tp(), "weights after 3 steps", 1e-2);
}

TEST(TensorParallel, ValueModelsTrainLikeOneRank) {
  for (model::HeadKind head : {model::HeadKind::value, model::HeadKind::score})
    for (bool sp : {false, true}) check_value_model_tp(head, sp);
}

}  // namespace
}  // namespace rf
