// Optimizer memory with data parallel and the distributed optimizer (issue #23): on the world's DP ranks, an
// engine with swap_optimizer (each rank swapping its shard; f32 and bf16), reuse_fp32_param (bf16; the split
// masters joined for the all-gather and split back), or both, trains bit for bit as the same layout without them,
// with one bucket and with overlapped per-layer buckets (and the overlapped all-gather): the losses, every rank's
// weights and its shard's moments over 3 steps. With the swap the moments are never on the device tier during
// forward and backward.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "dist/parallel_context.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;
using parallel_testing::kMicroBatchesPerStep;
using parallel_testing::step_micro_batches;
using parallel_testing::token_mean_nll;

constexpr int kNumSteps = 3;

engine::EngineConfig distributed(const std::string& dtype, bool overlap) {
  engine::EngineConfig c;
  c.dtype = dtype;
  c.use_distributed_optimizer = true;
  c.overlap_grad_reduce = overlap;
  c.overlap_param_gather = overlap;
  if (overlap) c.bucket_size = 1;  // a bucket per layer
  return c;
}

bool same_bits(TensorView a, TensorView b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

enum class Feature : uint8_t { swap, reuse, both };

void check_matches_plain(Feature feature, const std::string& dtype, bool overlap) {
  const bool swap = feature != Feature::reuse, reuse = feature != Feature::swap;
  SCOPED_TRACE(fmt::format("DP{} +distributed optimizer {}{}{}{}", world().size(), dtype, overlap ? " +overlap" : "",
                           swap ? " +swap_optimizer" : "", reuse ? " +reuse_fp32_param" : ""));
  dist::ParallelContext context = parallel_testing::data_parallel_context(world());
  const engine::EngineConfig plain_config = distributed(dtype, overlap);
  engine::EngineConfig config = plain_config;
  config.swap_optimizer = swap;
  config.reuse_fp32_param = reuse;
  if (!overlap) config.bucket_size = 777;  // slices cutting through parameters
  const optim::OptimConfig optim = parallel_testing::equivalence_optim();
  const model::ModelConfig model_config = parallel_testing::small_model_config(model::Arch::qwen3, true, 2, 3);
  kernels::KernelRegistry kernels;
  MemoryTracker plain_tracker, tracker;
  engine::TrainEngine plain(plain_config, optim, model_config, kernels, context, plain_tracker, 64);
  engine::TrainEngine engine(config, optim, model_config, kernels, context, tracker, 64);
  ASSERT_TRUE(engine.bucket_plan().sharded());
  plain.init_random_weights(3);
  engine.init_random_weights(3);
  const int rank = context.dp().rank(), per_rank = kMicroBatchesPerStep / context.dp().size();
  for (int step = 0; step < kNumSteps; ++step) {
    tracker.reset_peaks();
    const double loss =
        engine.forward_backward(step_micro_batches(step, rank, per_rank), token_mean_nll, engine::ForwardOnly::no).loss;
    if (swap) {
      EXPECT_EQ(tracker.peak(MemoryTier::device, MemoryCategory::optimizer), 0);
    }
    EXPECT_EQ(loss, plain.forward_backward(step_micro_batches(step, rank, per_rank), token_mean_nll,
                                           engine::ForwardOnly::no)
                        .loss);
    EXPECT_EQ(engine.optimizer_step(), plain.optimizer_step());
  }
  EXPECT_TRUE(same_bits(engine.master_weights().flat(), plain.master_weights().flat())) << "master weights";
  EXPECT_TRUE(same_bits(engine.compute_weights().flat(), plain.compute_weights().flat())) << "compute weights";
  EXPECT_TRUE(same_bits(engine.optimizer().exp_avg(), plain.optimizer().exp_avg())) << "exp_avg";
  EXPECT_TRUE(same_bits(engine.optimizer().exp_avg_sq(), plain.optimizer().exp_avg_sq())) << "exp_avg_sq";
  // Each rank swaps its shard: 1/DP of the moments (and padding) on its host tier.
  if (swap) {
    EXPECT_EQ(tracker.current(MemoryTier::host, MemoryCategory::optimizer),
              plain_tracker.current(MemoryTier::device, MemoryCategory::optimizer));
  }
}

TEST(OptimizerMemory, DistributedOptimizerTrainsBitForBitAsWithout) {
  for (bool overlap : {false, true}) {
    for (const char* dtype : {"float32", "bfloat16"}) check_matches_plain(Feature::swap, dtype, overlap);
    check_matches_plain(Feature::reuse, "bfloat16", overlap);
    check_matches_plain(Feature::both, "bfloat16", overlap);
  }
}

}  // namespace
}  // namespace rf
