// Context parallel against one rank (issue #24 acceptance 1, 4, 5): the same model (same seed), global batch and
// optimizer, trained 3 steps by a TrainEngine whose sequences are split over the CP group and by a one-rank
// TrainEngine, on every rank: per step the loss, every gradient (gathered over TP and the distributed optimizer's
// dp-cp shards) and the grad norm; after the third step every weight (equivalence_checks.h, f32, 1e-5 relative).
// Each of p2p, all_gather and a2a at CP 2 and 4, and TP 2 x CP 2 (with and without SP), CP 2 x DP 2 (with the
// distributed optimizer), CP 2 x PP 2. The micro-batches are packed documents of 3 to 9 tokens, so at CP 4 (2 CP =
// 8 chunks) most are shorter than one chunk per rank: padded. GQA (4 query heads, 2 kv heads) but for a2a at CP 4,
// whose kv heads must divide by 4. A forward-only pass (compute_log_prob, and an InferEngine at the same layout)
// returns the one-rank log-probs. Then the memory: at CP n a long document's per-rank activations are 1/n of one
// rank's (the tracker, within 10%), and a budget one rank cannot train under is enough at CP n.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "dist/parallel_context.h"
#include "engine/infer_engine.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

using dist::CpCommType;
using dist::testing::world;
using parallel_testing::step_micro_batches;

struct ContextLayout {
  int cp = 2;
  CpCommType comm = CpCommType::p2p;
  int tp = 1;
  int pp = 1;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  model::Arch arch = model::Arch::llama;
  int64_t kv_heads = 2;
  std::string name() const {
    std::string out = fmt::format("CP{} {}", cp, dist::enum_names(comm)[size_t(comm)].second);
    if (tp > 1) out += fmt::format(" x TP{}{}", tp, sequence_parallel ? " +SP" : "");
    if (pp > 1) out += fmt::format(" x PP{}", pp);
    if (world().size() > cp * tp * pp) out += fmt::format(" x DP{}", world().size() / (cp * tp * pp));
    if (distributed_optimizer) out += " +distributed optimizer";
    return out;
  }
};

engine::EngineConfig engine_config_for(const ContextLayout& layout) {
  engine::EngineConfig c;
  c.dtype = "float32";
  c.tensor_model_parallel_size = layout.tp;
  c.pipeline_model_parallel_size = layout.pp;
  c.context_parallel_size = layout.cp;
  c.cp_comm_type = layout.comm;
  c.sequence_parallel = layout.sequence_parallel;
  c.use_distributed_optimizer = layout.distributed_optimizer;
  return c;
}

dist::ParallelContext context_for(const ContextLayout& layout) {
  dist::ParallelDims dims;
  dims.world_size = world().size();
  dims.tensor_model_parallel_size = layout.tp;
  dims.pipeline_model_parallel_size = layout.pp;
  dims.context_parallel_size = layout.cp;
  return dist::ParallelContext::create(dist::RankLayout(dims), world(), layout.sequence_parallel, layout.comm);
}

void check_context_parallel_matches_one_rank(const ContextLayout& layout) {
  SCOPED_TRACE(layout.name());
  dist::ParallelContext context = context_for(layout);
  dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  engine::EngineConfig one_engine_config;
  one_engine_config.dtype = "float32";
  const optim::OptimConfig optim = parallel_testing::equivalence_optim();
  kernels::KernelRegistry kernels;
  MemoryTracker tracker, one_tracker;
  const model::ModelConfig config = parallel_testing::small_model_config(layout.arch, false, layout.kv_heads, 2);
  engine::TrainEngine parallel(engine_config_for(layout), optim, config, kernels, context, tracker, 64);
  engine::TrainEngine single(one_engine_config, optim, config, kernels, one_rank, one_tracker, 64);
  parallel.init_random_weights(3);
  single.init_random_weights(3);
  parallel_testing::expect_three_steps_match(parallel, single, context);
  const int64_t per_rank = parallel_testing::kMicroBatchesPerStep / context.dp().size();
  const int64_t first = context.dp().rank() * per_rank;
  const auto logp_cp =
      parallel.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute);
  const auto logp_one =
      single.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute);
  parallel_testing::expect_outputs_match(logp_cp, logp_one, "TrainEngine");
  engine::InferEngine frozen(engine_config_for(layout), config, kernels, context, tracker, 64);
  single.export_weights([&](const std::string& name, TensorView full) { frozen.update_weights(name, full); });
  parallel_testing::expect_outputs_match(
      frozen.compute_log_prob(step_micro_batches(5, first, per_rank), 1.0, model::EntropyOutput::compute), logp_one,
      "InferEngine");
}

std::vector<ContextLayout> layouts_for(int world_size) {
  std::vector<ContextLayout> out;
  if (world_size == 2) {
    for (CpCommType comm : {CpCommType::p2p, CpCommType::all_gather, CpCommType::a2a})
      out.push_back({.comm = comm, .arch = model::Arch::qwen3});
    out.push_back({.comm = CpCommType::p2p, .arch = model::Arch::qwen2});
    return out;
  }
  out.push_back({.cp = 4, .comm = CpCommType::p2p});
  out.push_back({.cp = 4, .comm = CpCommType::all_gather, .arch = model::Arch::qwen2});
  out.push_back({.cp = 4, .comm = CpCommType::a2a, .kv_heads = 4});
  out.push_back({.tp = 2});
  out.push_back({.comm = CpCommType::a2a, .tp = 2, .sequence_parallel = true, .kv_heads = 4});
  out.push_back({.tp = 2, .sequence_parallel = true, .arch = model::Arch::qwen3});
  out.push_back({.distributed_optimizer = true});
  out.push_back({.comm = CpCommType::all_gather});
  out.push_back({.pp = 2});
  return out;
}

TEST(ContextParallel, TrainsLikeOneRank) {
  ASSERT_TRUE(world().size() == 2 || world().size() == 4) << "the layouts are written for 2 and 4 ranks";
  for (const ContextLayout& layout : layouts_for(world().size())) check_context_parallel_matches_one_rank(layout);
}

// One long document (480 tokens): what a CP rank saves for the backward is its 1/CP share.
std::vector<engine::TensorMap> long_document(int64_t length) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < length; ++i) tokens.push_back(1 + (i * 37) % 199);
  std::vector<engine::TensorMap> batch;
  batch.push_back(parallel_testing::micro_batch({tokens}));
  return batch;
}

TEST(ContextParallel, ActivationsPerRankShrinkWithCp) {
  const ContextLayout layout{.cp = world().size()};
  constexpr int64_t kLength = 480;
  dist::ParallelContext context = context_for(layout);
  dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  engine::EngineConfig one_engine_config;
  one_engine_config.dtype = "float32";
  kernels::KernelRegistry kernels;
  MemoryTracker tracker, one_tracker;
  const model::ModelConfig config = parallel_testing::small_model_config(model::Arch::llama, false, 2, 2);
  engine::TrainEngine parallel(engine_config_for(layout), parallel_testing::equivalence_optim(), config, kernels,
                               context, tracker, kLength);
  engine::TrainEngine single(one_engine_config, parallel_testing::equivalence_optim(), config, kernels, one_rank,
                             one_tracker, kLength);
  parallel.init_random_weights(3);
  single.init_random_weights(3);
  const std::vector<engine::TensorMap> batch = long_document(kLength);
  parallel.forward_backward(batch, parallel_testing::token_mean_nll, engine::ForwardOnly::no);
  single.forward_backward(batch, parallel_testing::token_mean_nll, engine::ForwardOnly::no);
  const double cp_peak = double(tracker.peak(MemoryTier::device, MemoryCategory::activations));
  const double one_peak = double(one_tracker.peak(MemoryTier::device, MemoryCategory::activations));
  EXPECT_NEAR(cp_peak, one_peak / layout.cp, 0.10 * one_peak / layout.cp)
      << "activations per rank at CP " << layout.cp << ": " << cp_peak << " B, one rank " << one_peak << " B";
  if (world().rank() == 0)
    std::fprintf(stderr, "activations of a %ld-token document: one rank %.0f B, CP %d %.0f B per rank (%.3f of 1/CP)\n",
                 long(kLength), one_peak, layout.cp, cp_peak, cp_peak / (one_peak / layout.cp));
}

TEST(ContextParallel, TrainsASequenceOneRankHasNoRoomFor) {
  // The device budget of one rank's weights, gradients, moments and workspace plus half the long document's
  // activations: one rank is refused before it allocates anything; CP n trains and scores the document.
  const ContextLayout layout{.cp = world().size()};
  constexpr int64_t kLength = 480;
  kernels::KernelRegistry kernels;
  const model::ModelConfig config = parallel_testing::small_model_config(model::Arch::llama, false, 2, 2);
  engine::EngineConfig one_engine_config;
  one_engine_config.dtype = "float32";
  int64_t needed = 0;
  {
    dist::ParallelContext one_rank = dist::ParallelContext::single_process();
    MemoryTracker probe;
    engine::TrainEngine single(one_engine_config, parallel_testing::equivalence_optim(), config, kernels, one_rank,
                               probe, kLength);
    single.init_random_weights(3);
    single.forward_backward(long_document(kLength), parallel_testing::token_mean_nll, engine::ForwardOnly::no);
    needed = probe.peak(MemoryTier::device);
  }
  const int64_t activations_one = needed / 2;  // (a bound: the activations are most of it)
  const int64_t budget = needed - activations_one / 2;
  {
    dist::ParallelContext one_rank = dist::ParallelContext::single_process();
    MemoryTracker tight;
    tight.set_budget(MemoryTier::device, budget);
    EXPECT_THROW(
        {
          engine::TrainEngine single(one_engine_config, parallel_testing::equivalence_optim(), config, kernels,
                                     one_rank, tight, kLength);
          single.init_random_weights(3);
          single.forward_backward(long_document(kLength), parallel_testing::token_mean_nll, engine::ForwardOnly::no);
        },
        Error);
  }
  dist::ParallelContext context = context_for(layout);
  MemoryTracker tight;
  tight.set_budget(MemoryTier::device, budget);
  engine::TrainEngine parallel(engine_config_for(layout), parallel_testing::equivalence_optim(), config, kernels,
                               context, tight, kLength);
  parallel.init_random_weights(3);
  const double loss =
      parallel.forward_backward(long_document(kLength), parallel_testing::token_mean_nll, engine::ForwardOnly::no)
          .loss;
  EXPECT_TRUE(std::isfinite(loss));
  parallel.optimizer_step();
  const auto scored = parallel.compute_log_prob(long_document(kLength), 1.0, model::EntropyOutput::skip);
  ASSERT_EQ(scored.size(), 1u);
  EXPECT_EQ(scored[0].get("log_probs").numel(), kLength);
  EXPECT_LE(tight.peak(MemoryTier::device), budget);
}

TEST(ContextParallel, RefusesUlyssesWhenHeadsDoNotDivide) {
  const ContextLayout layout{.cp = world().size(), .comm = CpCommType::a2a, .kv_heads = 1};
  dist::ParallelContext context = context_for(layout);
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  try {
    engine::TrainEngine engine(engine_config_for(layout), parallel_testing::equivalence_optim(),
                               parallel_testing::small_model_config(model::Arch::llama, false, 1, 2), kernels, context,
                               tracker, 64);
    FAIL() << "a2a with 1 kv head over CP " << layout.cp << " was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cp_comm_type"), std::string::npos) << e.what();
    EXPECT_EQ(tracker.current(MemoryTier::device), 0) << "refused before any work";
  }
}

TEST(ContextParallel, AMicroBatchWhosePaddingOverflowsTheReservationIsAnError) {
  // Reserved for 16 tokens: 8 one-token documents are 8 tokens, but 8 x 2 CP padded ones more than a rank holds.
  const ContextLayout layout{.cp = world().size()};
  dist::ParallelContext context = context_for(layout);
  kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine engine(engine_config_for(layout), parallel_testing::equivalence_optim(),
                             parallel_testing::small_model_config(model::Arch::llama, false, 2, 2), kernels, context,
                             tracker, 16);
  engine.init_random_weights(3);
  std::vector<engine::TensorMap> batch;
  batch.push_back(parallel_testing::micro_batch({{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}}));
  try {
    engine.forward_backward(batch, parallel_testing::token_mean_nll, engine::ForwardOnly::no);
    FAIL() << "an overflowing micro-batch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 x context_parallel_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf
