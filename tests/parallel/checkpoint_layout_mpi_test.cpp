// Sharded checkpoints across parallel layouts (issue #6): the collective CheckpointWriter (every rank
// writes its own files, rank 0 publishes one step with the merged manifest; a clash fails on every
// rank and publishes nothing), and TrainEngine checkpoints saved at one layout and loaded at another.
// A parallel engine (TP, SP, PP, DP, the distributed optimizer with buckets that cut parameters mid-row)
// trains 2 steps and saves; a one-rank engine loads the step and must hold the same master weights and
// Adam moments bit for bit (gathered over TP and DP); the reverse too. Both then train a third step on
// the same global batch: losses and weights must agree as in the equivalence tests (1e-5 norm-wise).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "dist/parallel_context.h"
#include "dist/text_collectives.h"
#include "engine/train_engine.h"
#include "equivalence_checks.h"
#include "mpi_test_world.h"

namespace rf {
namespace {

namespace fs = std::filesystem;
using dist::testing::world;
using parallel_testing::step_micro_batches;
using parallel_testing::token_mean_nll;

// A fresh folder every rank sees: rank 0 creates it and tells the others.
class SharedFolder {
 public:
  SharedFolder() {
    std::string created;
    if (world().rank() == 0) {
      char pattern[] = "/tmp/rf_checkpoint_mpi_XXXXXX";
      created = ::mkdtemp(pattern) ? pattern : "";
    }
    path_ = dist::broadcast_text(world(), created, 0);
  }
  ~SharedFolder() {
    world().all_reduce_scalar(0, dist::ReduceOp::sum);  // nobody still reads it
    std::error_code ec;
    if (world().rank() == 0) fs::remove_all(path_, ec);
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

TEST(CollectiveCheckpointWriter, EveryRankWritesItsShardsAndRankZeroPublishesOneStep) {
  const SharedFolder folder;
  ASSERT_TRUE(folder.ok());
  const int rank = world().rank(), ranks = world().size();
  const std::string root = folder.path("run");
  {
    // Rank r holds rows [2r, 2r + 2) of a [2 x ranks, 3] tensor.
    const Tensor rows = dist::testing::rank_tensor({2, 3}, DType::f32, 0, 6 * rank);
    checkpoint::CheckpointWriter writer(root, 1, world());
    EXPECT_EQ(writer.num_writers(), ranks);
    writer.add_tensors("actor", "model-part" + std::to_string(rank),
                       {checkpoint::ShardedTensor{"w", rows, Shape{2 * ranks, 3}, Shape{2 * rank, 0}}});
    if (rank == 0) writer.add_json("trainer", "state", {{"global_step", 1}});
    writer.commit();
  }
  // Visible to every rank once commit returned anywhere.
  EXPECT_EQ(checkpoint::CheckpointReader::latest_step(root), 1);
  const checkpoint::CheckpointReader reader(root, 1);
  const Tensor whole({2 * ranks, 3}, DType::f32);
  reader.read_tensor("actor", "w", whole);
  const Tensor expected = dist::testing::rank_tensor({2 * ranks, 3}, DType::f32, 0, 0);
  EXPECT_EQ(std::memcmp(whole.view().raw(), expected.view().raw(), size_t(whole.numel()) * sizeof(float)), 0);
  EXPECT_EQ(reader.read_json("trainer", "state").at("global_step"), 1);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(reader.step_dir() + "/actor")) files += entry.is_regular_file();
  EXPECT_EQ(files, ranks);

  // Ranks 0 and 1 writing the same file (one after the other: at once they would race on the file
  // itself): rank 0 finds the clash, every rank throws, step 2 never appears.
  {
    const Tensor rows = dist::testing::rank_tensor({2, 3}, DType::f32, 0, 0);
    checkpoint::CheckpointWriter writer(root, 2, world());
    for (int writing = 0; writing < 2; ++writing) {
      if (rank == writing) writer.add_tensors("actor", "model", {checkpoint::whole_tensor("w", rows)});
      world().all_reduce_scalar(0, dist::ReduceOp::sum);
    }
    if (rank == 0) EXPECT_THROW(writer.commit(), Error);
    else EXPECT_THROW(writer.commit(), IoError);
  }
  world().all_reduce_scalar(0, dist::ReduceOp::sum);
  EXPECT_EQ(checkpoint::CheckpointReader::latest_step(root), 1);
  EXPECT_FALSE(fs::exists(folder.path("run/global_step_2")));
  if (rank == 0) {
    int hidden = 0;
    for (const auto& entry : fs::directory_iterator(root)) hidden += entry.path().filename().string().starts_with(".");
    EXPECT_EQ(hidden, 0) << "the failed step's temp folder was left behind";
  }
}

struct Layout {
  int tp = 1;
  int pp = 1;
  int cp = 1;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  model::Arch arch = model::Arch::llama;
  bool tied = false;
};

std::string describe(const Layout& l, int dp) {
  return fmt::format("TP{} x PP{} x CP{} x DP{}{}{} {}{}", l.tp, l.pp, l.cp, dp, l.sequence_parallel ? " +SP" : "",
                     l.distributed_optimizer ? " +distributed optimizer" : "", model::arch_name(l.arch),
                     l.tied ? " tied" : "");
}

// One rank's optimizer state (its shard of `plan`) laid out like its ParamStore, the other dp-cp ranks'
// shards filled in: a shard's fragments are disjoint across them, so a sum gathers them.
Tensor unsharded(const engine::TrainEngine& engine, TensorView shard_state, dist::ProcessGroup& dp) {
  const optim::BucketPlan& plan = engine.bucket_plan();
  if (!plan.sharded()) return clone(shard_state, DType::f32);
  Tensor flat({engine.master_weights().layout().total_numel()}, DType::f32);
  std::memset(flat.view().raw(), 0, size_t(flat.numel()) * sizeof(float));
  for (const optim::ShardFragment& f : plan.fragments())
    copy_convert(shard_state.slice(0, f.shard_offset, f.numel), flat.view().slice(0, f.flat_offset, f.numel));
  dp.all_reduce(flat, dist::ReduceOp::sum);
  return flat;
}

// `parallel`'s `flat` (laid out like its ParamStore) gathered over TP equals `single`'s bit for bit.
void expect_same_bits(const engine::TrainEngine& parallel, TensorView flat, const engine::TrainEngine& single,
                      TensorView single_flat, dist::ProcessGroup& tp, const std::string& what) {
  const model::ParamLayout& single_layout = single.master_weights().layout();
  for (const model::ParamEntry& e : parallel.master_weights().layout().entries()) {
    const Tensor whole = model::gather_tp_tensor(e, flat.slice(0, e.offset, e.shape.numel()).reshape(e.shape), tp);
    const model::ParamEntry& s = single_layout.entry(e.name);
    ASSERT_EQ(whole.numel(), s.shape.numel()) << what << " " << e.name;
    EXPECT_EQ(std::memcmp(whole.view().raw(), single_flat.slice(0, s.offset, s.shape.numel()).raw(),
                          size_t(whole.numel()) * sizeof(float)),
              0)
        << what << " " << e.name << " differs";
  }
}

void expect_same_state(engine::TrainEngine& parallel, engine::TrainEngine& single, dist::ParallelContext& context,
                       const std::string& what) {
  expect_same_bits(parallel, parallel.master_weights().flat(), single, single.master_weights().flat(), context.tp(),
                   what + " master weights");
  expect_same_bits(parallel, unsharded(parallel, parallel.optimizer().exp_avg(), context.dp_cp()), single,
                   single.optimizer().exp_avg(), context.tp(), what + " exp_avg");
  expect_same_bits(parallel, unsharded(parallel, parallel.optimizer().exp_avg_sq(), context.dp_cp()), single,
                   single.optimizer().exp_avg_sq(), context.tp(), what + " exp_avg_sq");
  EXPECT_EQ(parallel.optimizer().num_steps(), single.optimizer().num_steps()) << what;
  EXPECT_EQ(parallel.lr(), single.lr()) << what;
}

constexpr int64_t kMicroBatches = parallel_testing::kMicroBatchesPerStep;

double train_step(engine::TrainEngine& engine, int step, int dp_rank, int dp) {
  const int64_t per_rank = kMicroBatches / dp;
  const double loss = engine.forward_backward(step_micro_batches(step, dp_rank * per_rank, per_rank),
                                              token_mean_nll, engine::ForwardOnly::no)
                          .loss;
  engine.optimizer_step();
  engine.lr_step();
  return loss;
}

// Saved by `from`, loaded by `to`; they then train step 2 alike.
void expect_resumes_alike(engine::TrainEngine& parallel, engine::TrainEngine& single, dist::ParallelContext& context,
                          const std::string& what) {
  expect_same_state(parallel, single, context, what + ", after loading:");
  const int dp = context.dp().size();
  const double loss_parallel = train_step(parallel, 2, context.dp().rank(), dp);
  const double loss_single = train_step(single, 2, 0, 1);
  EXPECT_NEAR(loss_parallel, loss_single, 1e-5 * std::abs(loss_single)) << what << ": the resumed step's loss";
  parallel_testing::expect_params_match(parallel.master_weights().layout(), parallel.master_weights().flat(),
                                        single.master_weights(), context.tp(), what + ": weights after the resumed step",
                                        1e-2);  // the k_proj bias, as in tp_equivalence_mpi_test.cpp
}

void check_layout(const Layout& layout) {
  const int dp = world().size() / (layout.tp * layout.pp * layout.cp);
  const std::string name = describe(layout, dp);
  SCOPED_TRACE(name);
  dist::ParallelDims dims;
  dims.world_size = world().size();
  dims.tensor_model_parallel_size = layout.tp;
  dims.pipeline_model_parallel_size = layout.pp;
  dims.context_parallel_size = layout.cp;
  dist::ParallelContext context = dist::ParallelContext::create(dist::RankLayout(dims), world(), layout.sequence_parallel);
  dist::ParallelContext one_rank = dist::ParallelContext::single_process();
  engine::EngineConfig parallel_config, single_config;
  parallel_config.dtype = single_config.dtype = "float32";
  parallel_config.tensor_model_parallel_size = layout.tp;
  parallel_config.pipeline_model_parallel_size = layout.pp;
  parallel_config.context_parallel_size = layout.cp;
  parallel_config.sequence_parallel = layout.sequence_parallel;
  parallel_config.use_distributed_optimizer = layout.distributed_optimizer;
  parallel_config.overlap_grad_reduce = true;
  parallel_config.bucket_size = 1;  // a bucket per layer: DP chunks start and end mid-row
  optim::OptimConfig optim;
  optim.lr = 1e-4;
  optim.lr_warmup_steps = 2;
  optim.lr_decay_steps = 100;
  const kernels::KernelRegistry kernels;
  const model::ModelConfig config =
      parallel_testing::small_model_config(layout.arch, layout.tied, std::max(2, layout.tp), std::max(2, layout.pp));
  auto make_parallel = [&](MemoryTracker& tracker) {
    return engine::TrainEngine(parallel_config, optim, config, kernels, context, tracker, 64);
  };
  auto make_single = [&](MemoryTracker& tracker) {
    return engine::TrainEngine(single_config, optim, config, kernels, one_rank, tracker, 64);
  };
  const SharedFolder folder;
  ASSERT_TRUE(folder.ok());

  {  // parallel -> one rank
    MemoryTracker tracker, single_tracker;
    engine::TrainEngine parallel = make_parallel(tracker);
    parallel.init_random_weights(5);
    for (int step = 0; step < 2; ++step) train_step(parallel, step, context.dp().rank(), dp);
    checkpoint::CheckpointWriter writer(folder.path("from_parallel"), 2, world());
    parallel.save_checkpoint(writer, "actor");
    writer.commit();
    engine::TrainEngine single = make_single(single_tracker);
    single.load_checkpoint(checkpoint::CheckpointReader(folder.path("from_parallel"), 2), "actor");
    expect_resumes_alike(parallel, single, context, "saved at " + name + ", loaded at one rank");
  }
  {  // one rank -> parallel
    MemoryTracker tracker, single_tracker;
    engine::TrainEngine single = make_single(single_tracker);
    single.init_random_weights(6);
    for (int step = 0; step < 2; ++step) train_step(single, step, 0, 1);
    if (world().rank() == 0) {
      checkpoint::CheckpointWriter writer(folder.path("from_one_rank"), 2);
      single.save_checkpoint(writer, "actor");
      writer.commit();
    }
    world().all_reduce_scalar(0, dist::ReduceOp::sum);  // the step is published
    engine::TrainEngine parallel = make_parallel(tracker);
    parallel.load_checkpoint(checkpoint::CheckpointReader(folder.path("from_one_rank"), 2), "actor");
    expect_resumes_alike(parallel, single, context, "saved at one rank, loaded at " + name);
  }
}

TEST(CheckpointLayouts, ASavedStepLoadsAtAnotherLayout) {
  std::vector<Layout> layouts = {
      {.tp = 2, .arch = model::Arch::qwen2},  // vocab 200 padded to 256: padding rows never saved
      {.tp = 1, .distributed_optimizer = true, .arch = model::Arch::qwen3, .tied = true},
      // The tied embedding's last-stage copy is not saved and loads from the first stage's.
      {.pp = 2, .arch = model::Arch::qwen3, .tied = true},
      // CP ranks are replicas: dp-cp rank 0 writes the weights, the distributed optimizer's shards span DP x CP.
      {.cp = 2, .distributed_optimizer = true, .arch = model::Arch::qwen3},
  };
  if (world().size() == 4) {
    layouts.push_back({.tp = 2, .sequence_parallel = true, .distributed_optimizer = true, .arch = model::Arch::qwen2});
    layouts.push_back({.tp = 4, .arch = model::Arch::llama});
    layouts.push_back({.tp = 2, .pp = 2, .arch = model::Arch::qwen2, .tied = true});
    layouts.push_back({.pp = 2, .distributed_optimizer = true, .arch = model::Arch::llama, .tied = true});
    layouts.push_back({.pp = 4, .arch = model::Arch::llama});
  } else {
    layouts.push_back({.tp = 2, .sequence_parallel = true, .arch = model::Arch::qwen3});
  }
  for (const Layout& layout : layouts) check_layout(layout);
}

// The engine refuses a writer that is not over its ranks: each rank would publish a step of its own.
TEST(CheckpointLayouts, TheWriterMustSpanTheEnginesRanks) {
  dist::ParallelContext context = parallel_testing::data_parallel_context(world());
  engine::EngineConfig config;
  config.dtype = "float32";
  optim::OptimConfig optim;
  optim.lr_decay_steps = 100;
  const kernels::KernelRegistry kernels;
  MemoryTracker tracker;
  engine::TrainEngine engine(config, optim, parallel_testing::small_model_config(model::Arch::llama, false, 2, 1),
                             kernels, context, tracker, 64);
  const SharedFolder folder;
  checkpoint::CheckpointWriter writer(folder.path("rank" + std::to_string(world().rank())), 1);
  EXPECT_THROW(engine.save_checkpoint(writer, "actor"), Error);
}

}  // namespace
}  // namespace rf
