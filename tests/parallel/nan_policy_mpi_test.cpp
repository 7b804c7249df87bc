// check_for_nan_in_loss_and_grad over DP and TP ranks (with the distributed optimizer and overlapped
// reduction): a NaN that only one DP rank's micro-batch produces makes every rank decide alike.
//   error      every rank throws, before anything is applied, the same message naming that DP rank and
//              micro-batch; no weight changed anywhere.
//   skip_step  every rank skips, whether the NaN is in a gradient (which the DP reduction spreads) or only
//              in that rank's loss (which nothing else spreads: the decision is reduced); after a skipped
//              step and a finite one the weights match a one-rank run that only ran the finite ones.
// One rank: tests/engine/nan_policy_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>

#include "dist/parallel_context.h"
#include "dist/text_collectives.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::testing::world;
using parallel_testing::expect_params_match;
using parallel_testing::step_micro_batches;

constexpr int64_t kNumMicroBatches = parallel_testing::kMicroBatchesPerStep;

enum class Poison : uint8_t { none, loss, loss_grad };

// token_mean_nll (equivalence_checks.h) that, on the ranks where `poisoned` is true, puts a NaN into its
// last micro-batch's loss value or into the gradient it writes for token 1 of it.
engine::LossFn poisoned_nll(Poison poison, bool poisoned, int64_t num_micro_batches) {
  auto calls = std::make_shared<int64_t>(0);
  return [=](const engine::TensorMap& mb, const model::ModelOutputs& out, const engine::LossContext& ctx,
             const model::OutputGrads& grads) {
    engine::LossOutput result = parallel_testing::token_mean_nll(mb, out, ctx, grads);
    if (poisoned && ++*calls == num_micro_batches) {
      if (poison == Poison::loss) result.loss = std::numeric_limits<double>::quiet_NaN();
      if (poison == Poison::loss_grad) grads.dlogp_N.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
    }
    return result;
  };
}

struct Layout {
  int tp = 1;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool overlap = false;

  std::string name(int dp) const {
    return fmt::format("TP{} x DP{}{}{}{}", tp, dp, sequence_parallel ? " +SP" : "",
                       distributed_optimizer ? " +distributed optimizer" : "", overlap ? " +overlap" : "");
  }
};

std::vector<Layout> layouts_for(int world_size) {
  std::vector<Layout> out = {{.tp = 1},
                             {.tp = 1, .distributed_optimizer = true, .overlap = true},
                             {.tp = 2, .sequence_parallel = world_size == 2}};
  if (world_size == 4)
    out.push_back({.tp = 2, .sequence_parallel = true, .distributed_optimizer = true, .overlap = true});
  return out;
}

struct LayoutRun {
  dist::ParallelContext context;
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine engine;
  int64_t per_rank;

  LayoutRun(const Layout& layout, engine::NanPolicy policy)
      : context(dist::ParallelContext::create(dist::RankLayout(dims(layout)), world(), layout.sequence_parallel)),
        engine(engine_config(layout, policy), optim(), config(), kernels, context, tracker, 64),
        per_rank(kNumMicroBatches / context.dp().size()) {
    engine.init_random_weights(3);
  }
  // Step `step`'s micro-batches of this DP rank, the last DP rank's poisoned; returns the grad norm.
  double train(int step, Poison poison) {
    const int dp = context.dp().rank();
    engine.forward_backward(step_micro_batches(step, dp * per_rank, per_rank),
                            poisoned_nll(poison, dp == context.dp().size() - 1, per_rank), engine::ForwardOnly::no);
    return engine.optimizer_step(fmt::format("step {}", step));
  }

  static dist::ParallelDims dims(const Layout& layout) {
    dist::ParallelDims d;
    d.world_size = world().size();
    d.tensor_model_parallel_size = layout.tp;
    return d;
  }
  static engine::EngineConfig engine_config(const Layout& layout, engine::NanPolicy policy) {
    engine::EngineConfig c;
    c.dtype = "float32";
    c.tensor_model_parallel_size = layout.tp;
    c.sequence_parallel = layout.sequence_parallel;
    c.use_distributed_optimizer = layout.distributed_optimizer;
    c.overlap_grad_reduce = layout.overlap;
    c.overlap_param_gather = layout.overlap && layout.distributed_optimizer;
    if (layout.overlap) c.bucket_size = 1;  // a bucket per layer
    c.nan_policy = policy;
    return c;
  }
  static optim::OptimConfig optim() {
    optim::OptimConfig o;
    o.lr = 1e-4;  // as dp_equivalence_mpi_test.cpp: f32 summation-order noise stays small
    o.lr_decay_steps = 100;
    return o;
  }
  static model::ModelConfig config() {
    return parallel_testing::small_model_config(model::Arch::qwen3, false, /*kv_heads=*/2, /*num_layers=*/2);
  }
};

TEST(NanPolicy, EveryRankStopsWithTheSameMessage) {
  ASSERT_TRUE(world().size() == 2 || world().size() == 4) << "the layouts are written for 2 and 4 ranks";
  for (const Layout& layout : layouts_for(world().size())) {
    LayoutRun run(layout, engine::NanPolicy::error);
    const int dp = run.context.dp().size();
    SCOPED_TRACE(layout.name(dp));
    run.train(0, Poison::none);
    const Tensor before = clone(run.engine.master_weights().flat(), DType::f32);
    std::string message;
    try {
      run.train(1, Poison::loss);
    } catch (const Error& e) {
      message = e.what();
    }
    const std::string expected =
        fmt::format("step 1: not finite: the loss of micro-batch {} of {} on DP rank {} is nan", run.per_rank - 1,
                    run.per_rank, dp - 1);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    // The same text on every rank once the rank label ("[rank r ...] ") is cut.
    const std::string text = message.substr(message.find("] ") + 2);
    for (const std::string& other : dist::all_gather_texts(world(), text)) EXPECT_EQ(other, text);
    const TensorView after = run.engine.master_weights().flat();
    EXPECT_EQ(std::memcmp(before.view().raw(), after.raw(), after.nbytes()), 0) << "a weight changed";
    EXPECT_EQ(run.engine.optimizer().num_steps(), 1);
  }
}

TEST(NanPolicy, EveryRankSkipsAndTrainsOnLikeOneRank) {
  ASSERT_TRUE(world().size() == 2 || world().size() == 4) << "the layouts are written for 2 and 4 ranks";
  for (const Layout& layout : layouts_for(world().size())) {
    LayoutRun run(layout, engine::NanPolicy::skip_step);
    SCOPED_TRACE(layout.name(run.context.dp().size()));
    dist::ParallelContext one_rank = dist::ParallelContext::single_process();
    kernels::KernelRegistry kernels;
    MemoryTracker tracker;
    engine::EngineConfig one_config;
    one_config.dtype = "float32";
    engine::TrainEngine single(one_config, LayoutRun::optim(), LayoutRun::config(), kernels, one_rank, tracker, 64);
    single.init_random_weights(3);
    auto train_single = [&](int step) {
      single.forward_backward(step_micro_batches(step, 0, kNumMicroBatches), parallel_testing::token_mean_nll,
                              engine::ForwardOnly::no);
      return single.optimizer_step();
    };

    const double norm_dp = run.train(0, Poison::none), norm_one = train_single(0);
    EXPECT_NEAR(norm_dp, norm_one, 1e-5 * norm_one);
    EXPECT_TRUE(std::isnan(run.train(1, Poison::loss_grad)));  // the NaN gradient, spread by the DP reduction
    EXPECT_TRUE(run.engine.last_step_skipped());
    EXPECT_TRUE(std::isfinite(run.train(2, Poison::loss)));  // finite gradients; one rank's NaN loss
    EXPECT_TRUE(run.engine.last_step_skipped());
    EXPECT_EQ(run.engine.num_skipped_steps(), 2);
    EXPECT_EQ(run.engine.optimizer().num_steps(), 1);
    run.train(3, Poison::none);
    train_single(3);
    EXPECT_FALSE(run.engine.last_step_skipped());
    const model::ParamLayout& params = run.engine.master_weights().layout();
    expect_params_match(params, run.engine.master_weights().flat(), single.master_weights(), run.context.tp(),
                        "weights after a skipped step", 1e-2);
  }
}

}  // namespace
}  // namespace rf
