// Idle-role offload under data parallel with everything overlapped (a gradient bucket per layer reduced
// during the backward; with the distributed optimizer the updated weights all-gathered in the
// background): offloading every part after each stage, while a bucket's all-reduce or the weights'
// all-gather is still in flight, trains bit for bit like not offloading, on every rank, in bf16.
// Offload completes what is in flight first. Between stages other collectives run on the same ranks,
// as another role's would: they progress whatever is still in flight, which would then write into an
// offloaded buffer and be overwritten when it comes back.
#include <gtest/gtest.h>

#include <cstring>

#include "dist/parallel_context.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;
using parallel_testing::step_micro_batches;
using parallel_testing::token_mean_nll;

constexpr int kNumSteps = 3;

struct RunResult {
  std::vector<double> losses, grad_norms;
  Tensor master, exp_avg, exp_avg_sq;
};

enum class Optimizer : uint8_t { replicated, distributed };

RunResult train(Optimizer optimizer, engine::OffloadSet offload) {
  dist::ParallelDims dims;
  dims.world_size = world().size();
  dist::ParallelContext context = dist::ParallelContext::create(dist::RankLayout(dims), world(), false);
  engine::EngineConfig config;
  config.use_distributed_optimizer = optimizer == Optimizer::distributed;
  config.overlap_grad_reduce = true;
  config.overlap_param_gather = config.use_distributed_optimizer;
  config.bucket_size = 1;  // a bucket per layer
  optim::OptimConfig optim;
  optim.lr = 1e-3;
  optim.lr_decay_steps = 100;
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine engine(config, optim, parallel_testing::small_model_config(model::Arch::qwen2, false, 2, 3),
                             kernels, context, tracker, 64);
  engine.init_random_weights(5);
  const int dp = context.dp().size(), rank = context.dp().rank();
  const int64_t per_rank = parallel_testing::kMicroBatchesPerStep / dp;
  auto another_roles_collectives = [&] {
    for (int i = 0; i < 4; ++i) context.dp().all_reduce_scalar(1.0, dist::ReduceOp::sum);
  };
  RunResult run;
  for (int step = 0; step < kNumSteps; ++step) {
    run.losses.push_back(
        engine.forward_backward(step_micro_batches(step, rank * per_rank, per_rank), token_mean_nll, engine::ForwardOnly::no)
            .loss);
    engine.offload(offload);  // the last buckets' reductions may still be in flight
    another_roles_collectives();
    if (offload.grads) {
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::grads), 0);
    }
    run.grad_norms.push_back(engine.optimizer_step());
    engine.lr_step();
    engine.offload(offload);  // the weights' all-gather is in flight
    another_roles_collectives();
    if (offload.params) {
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::params), 0);
    }
  }
  run.master = clone(engine.master_weights().flat(), DType::f32);
  run.exp_avg = clone(engine.optimizer().exp_avg(), DType::f32);
  run.exp_avg_sq = clone(engine.optimizer().exp_avg_sq(), DType::f32);
  return run;
}

void expect_same_bits(TensorView actual, TensorView expected, const char* what) {
  ASSERT_EQ(actual.nbytes(), expected.nbytes()) << what;
  EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), actual.nbytes()), 0) << what;
}

TEST(OffloadMpi, OffloadingWhileCollectivesAreInFlightChangesNoBit) {
  if (parallel_testing::kMicroBatchesPerStep % world().size() != 0) GTEST_SKIP() << "the step's micro-batches do not divide";
  for (const Optimizer optimizer : {Optimizer::replicated, Optimizer::distributed}) {
    SCOPED_TRACE(optimizer == Optimizer::distributed ? "distributed optimizer" : "replicated optimizer");
    const RunResult plain = train(optimizer, {});
    const RunResult offloaded = train(optimizer, engine::OffloadSet::all());
    EXPECT_EQ(offloaded.losses, plain.losses);
    EXPECT_EQ(offloaded.grad_norms, plain.grad_norms);
    expect_same_bits(offloaded.master, plain.master, "master weights");
    expect_same_bits(offloaded.exp_avg, plain.exp_avg, "exp_avg");
    expect_same_bits(offloaded.exp_avg_sq, plain.exp_avg_sq, "exp_avg_sq");
  }
}

}  // namespace
}  // namespace rf
