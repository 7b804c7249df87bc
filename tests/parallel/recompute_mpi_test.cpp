// Full activation recompute in the engine (issue #23 acceptance 1): at the same parallel layout, a TrainEngine
// that recomputes gives bit for bit the losses, gradients and weights of one that saves everything, over 3
// steps, f32 and bf16, with TP + SP, PP with virtual stages and DP on the ranks of the world, for uniform and
// block recompute; and the tracker's activation peak drops.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dist/parallel_context.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;
using parallel_testing::kMicroBatchesPerStep;
using parallel_testing::step_micro_batches;

struct RecomputeLayout {
  std::string name;
  int tp = 1;
  int pp = 1;
  bool sequence_parallel = false;
  int64_t vp = 1;
};

struct Trained {
  std::vector<double> losses;
  Tensor grads, weights;  // after the last step's reduction; after the last step
  int64_t activation_peak = 0;
};

Trained train_three_steps(const RecomputeLayout& layout, const std::string& dtype,
                          std::optional<model::RecomputeMethod> method) {
  dist::ParallelDims dims;
  dims.world_size = world().size();
  dims.tensor_model_parallel_size = layout.tp;
  dims.pipeline_model_parallel_size = layout.pp;
  dist::ParallelContext context = dist::ParallelContext::create(dist::RankLayout(dims), world(), layout.sequence_parallel);
  engine::EngineConfig config;
  config.dtype = dtype;
  config.tensor_model_parallel_size = layout.tp;
  config.pipeline_model_parallel_size = layout.pp;
  config.sequence_parallel = layout.sequence_parallel;
  if (layout.vp > 1) config.pipeline_split.virtual_pipeline_model_parallel_size = layout.vp;
  if (method) {
    config.recompute_granularity = engine::RecomputeGranularity::full;
    config.recompute_method = method;
    config.recompute_num_layers = 2;
  }
  const kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine engine(config, parallel_testing::equivalence_optim(),
                             parallel_testing::small_model_config(model::Arch::qwen3, true, 2, 4 * layout.pp * layout.vp),
                             kernels, context, tracker, 64);
  engine.init_random_weights(5);
  const int64_t per_rank = kMicroBatchesPerStep / context.dp().size(), first = context.dp().rank() * per_rank;
  Trained out;
  for (int step = 0; step < 3; ++step) {
    out.losses.push_back(engine
                             .forward_backward(step_micro_batches(step, first, per_rank), parallel_testing::token_mean_nll,
                                               engine::ForwardOnly::no)
                             .loss);
    engine.reduce_gradients();
    if (step == 2) out.grads = clone(engine.grads().flat(), DType::f32);
    engine.optimizer_step();
  }
  out.weights = clone(engine.master_weights().flat(), DType::f32);
  out.activation_peak = tracker.peak(MemoryTier::device, MemoryCategory::activations);
  return out;
}

void expect_same_bits(TensorView a, TensorView b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.numel() << " values differ";
}

std::vector<RecomputeLayout> layouts_for(int world_size) {
  if (world_size == 2)
    return {{.name = "TP2 + SP", .tp = 2, .sequence_parallel = true}, {.name = "PP2 x VPP2", .pp = 2, .vp = 2},
            {.name = "DP2"}};
  return {{.name = "TP2 x PP2 + SP", .tp = 2, .pp = 2, .sequence_parallel = true},
          {.name = "PP2 x VPP2 x DP2", .pp = 2, .vp = 2}};
}

TEST(FullRecompute, TrainsBitForBitLikeSavingEverything) {
  for (const RecomputeLayout& layout : layouts_for(world().size()))
    for (const std::string dtype : {"float32", "bfloat16"}) {
      const Trained plain = train_three_steps(layout, dtype, std::nullopt);
      for (const model::RecomputeMethod method : {model::RecomputeMethod::uniform, model::RecomputeMethod::block}) {
        SCOPED_TRACE(fmt::format("{} {} {}", layout.name, dtype,
                                 method == model::RecomputeMethod::uniform ? "uniform 2" : "block 2"));
        const Trained recomputed = train_three_steps(layout, dtype, method);
        EXPECT_EQ(recomputed.losses, plain.losses);
        expect_same_bits(recomputed.grads, plain.grads, "gradients of step 3");
        expect_same_bits(recomputed.weights, plain.weights, "weights after 3 steps");
        EXPECT_LT(recomputed.activation_peak, plain.activation_peak);
      }
    }
}

}  // namespace
}  // namespace rf
