// Every dispatch mode under mpirun with the real RankLayout and ParallelContext, for every layout the
// world size allows: each rank receives exactly the chunk the mode names, its index computed here from
// the rank's own groups (ctx.dp(), ctx.cp(), ctx.pp()) and the chunk computed on one rank by
// dispatch_batch; and the root's collect returns the original batch, padding removed, with each sample
// computed by a rank the collect rule names (tp = 0, last pp stage, cp = 0 for Megatron).
//
// Dimension legend: B batch (samples).
#include "rl/batch_exchange.h"

#include <gtest/gtest.h>

#include "batch_test_data.h"
#include "dist/parallel_context.h"
#include "mpi_test_world.h"
#include "rl/batch_dispatch.h"

namespace rf::testing {
namespace {

using dist::testing::world;
using rl::DispatchMode;

constexpr std::array<DispatchMode, 4> kModes{DispatchMode::one_to_all, DispatchMode::dp_compute_proto,
                                             DispatchMode::megatron_compute_proto,
                                             DispatchMode::megatron_pp_as_dp_proto};

std::vector<dist::ParallelDims> dense_layouts(int world_size) {
  std::vector<dist::ParallelDims> layouts;
  for (int tp = 1; tp <= world_size; ++tp)
    for (int cp = 1; cp <= world_size; ++cp)
      for (int pp = 1; pp <= world_size; ++pp)
        if (world_size % (tp * cp * pp) == 0)
          layouts.push_back({.world_size = world_size,
                             .tensor_model_parallel_size = tp,
                             .context_parallel_size = cp,
                             .pipeline_model_parallel_size = pp});
  return layouts;
}

// The chunk this rank must receive, from its own process groups.
int64_t my_chunk(DispatchMode mode, const dist::ParallelContext& ctx) {
  switch (mode) {
    case DispatchMode::one_to_all: return 0;
    case DispatchMode::dp_compute_proto: return ctx.role().rank();
    case DispatchMode::megatron_compute_proto: return ctx.dp().rank();
    case DispatchMode::megatron_pp_as_dp_proto:
      return (int64_t(ctx.cp().rank()) * ctx.dp().size() + ctx.dp().rank()) * ctx.pp().size() + ctx.pp().rank();
  }
  return -1;
}

// Whether a rank at these group ranks is the one whose output is collected.
bool collects(DispatchMode mode, int role_rank, int tp, int cp, int pp, int pp_size) {
  switch (mode) {
    case DispatchMode::one_to_all: return role_rank == 0;
    case DispatchMode::dp_compute_proto: return true;
    case DispatchMode::megatron_compute_proto: return tp == 0 && cp == 0 && pp == pp_size - 1;
    case DispatchMode::megatron_pp_as_dp_proto: return tp == 0;
  }
  return false;
}

TEST(BatchExchangeMpi, EveryModeOnEveryLayout) {
  const int W = world().size();
  for (const dist::ParallelDims& dims : dense_layouts(W)) {
    const dist::ParallelContext ctx = dist::ParallelContext::create(dist::RankLayout(dims), world(), false);
    const rl::DispatchLayout layout = rl::DispatchLayout::from_rank_layout(ctx.layout());
    // Each rank's (tp, cp, pp) group ranks, known everywhere, for the root's collect check.
    Tensor mine(Shape{3}, DType::i32), coords(Shape{W, 3}, DType::i32);
    mine.at<int32_t>({0}) = ctx.tp().rank();
    mine.at<int32_t>({1}) = ctx.cp().rank();
    mine.at<int32_t>({2}) = ctx.pp().rank();
    world().all_gather(mine, coords);

    for (DispatchMode mode : kModes) {
      const rl::DispatchPlan plan = rl::make_dispatch_plan(mode, layout);
      for (int64_t B : {int64_t(0), int64_t(1), int64_t(2 * W + 1)}) {
        for (int root : {0, W - 1}) {
          SCOPED_TRACE(std::string(rl::dispatch_mode_name(mode)) + " " + ctx.layout().label(world().rank()) +
                       " tp=" + std::to_string(dims.tensor_model_parallel_size) + " cp=" +
                       std::to_string(dims.context_parallel_size) + " pp=" +
                       std::to_string(dims.pipeline_model_parallel_size) + " B=" + std::to_string(B) +
                       " root=" + std::to_string(root));
          const rl::Batch global = make_test_batch(B);
          const rl::Batch nothing;
          const bool is_root = world().rank() == root;
          const rl::ReceivedChunk received = rl::scatter_batch(is_root ? global : nothing, plan, ctx.role(), root);

          // The same computation on this rank alone.
          const rl::DispatchedBatch reference = rl::dispatch_batch(global, plan);
          EXPECT_EQ(received.pad_size, reference.pad_size);
          expect_batches_equal(received.batch, reference.chunks[size_t(my_chunk(mode, ctx))]);

          rl::Batch output = received.batch.clone();
          Tensor who(Shape{output.size()}, DType::i32);
          for (int64_t i = 0; i < output.size(); ++i) who.at<int32_t>({i}) = world().rank();
          output.set_tensor("computed_by", std::move(who));
          std::optional<rl::Batch> collected = rl::gather_batch(output, plan, received.pad_size, ctx.role(), root);
          ASSERT_EQ(collected.has_value(), is_root);
          if (!is_root) continue;
          for (int64_t i = 0; i < collected->size(); ++i) {
            const int by = collected->tensor("computed_by").at<int32_t>({i});
            EXPECT_TRUE(collects(mode, by, coords.at<int32_t>({by, 0}), coords.at<int32_t>({by, 1}),
                                 coords.at<int32_t>({by, 2}), dims.pipeline_model_parallel_size))
                << "sample " << i << " was collected from rank " << by;
          }
          (void)collected->pop({.tensors = {"computed_by"}});
          expect_batches_equal(*collected, global);
        }
      }
    }
  }
}

TEST(BatchExchangeMpi, MegatronReplicasShareTheirChunk) {
  const int W = world().size();
  for (const dist::ParallelDims& dims : dense_layouts(W)) {
    const dist::ParallelContext ctx = dist::ParallelContext::create(dist::RankLayout(dims), world(), false);
    const rl::DispatchPlan plan = rl::make_dispatch_plan(DispatchMode::megatron_compute_proto,
                                                         rl::DispatchLayout::from_rank_layout(ctx.layout()));
    const rl::Batch global = make_test_batch(3 * W);
    const rl::ReceivedChunk received = rl::scatter_batch(global, plan, ctx.role(), 0);
    // The TP, CP and PP neighbours of a replica hold the same samples; DP neighbours hold others.
    Tensor first(Shape{1}, DType::i64);
    first.at<int64_t>({0}) = sample_ids(received.batch).front();
    for (dist::ProcessGroup* group : {&ctx.tp(), &ctx.cp(), &ctx.pp(), &ctx.dp()}) {
      Tensor firsts(Shape{group->size()}, DType::i64);
      group->all_gather(first, firsts);
      for (int r = 0; r < group->size(); ++r) {
        const int64_t expected = group == &ctx.dp() ? r * (3 * W / ctx.dp().size()) : first.at<int64_t>({0});
        EXPECT_EQ(firsts.at<int64_t>({r}), expected) << group->name() << " rank " << r;
      }
    }
  }
}

TEST(BatchExchangeMpi, PlanForAnotherWorldSizeIsRejected) {
  rl::DispatchLayout layout{.tp_size = 1, .cp_size = 1, .dp_size = world().size() + 1, .pp_size = 1, .ranks = {}};
  for (int r = 0; r <= world().size(); ++r) layout.ranks.push_back({.dp = r});
  const rl::DispatchPlan plan = rl::make_dispatch_plan(DispatchMode::dp_compute_proto, layout);
  try {
    (void)rl::scatter_batch(rl::Batch{}, plan, world(), 0);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the plan is for " + std::to_string(world().size() + 1) + " ranks"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace rf::testing
