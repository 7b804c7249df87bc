// Optimizer memory (issue #23): the swap optimizer (megatron.swap_optimizer) trains bit for bit as the plain path,
// f32 and bf16, over several steps and through offload round trips, with the moments (and bf16 masters) off the
// device tier during forward and backward; bf16 parameter-copy reuse (megatron.reuse_fp32_param), alone and with
// the swap, trains bit for bit as the plain bf16 path with 4 bytes of weights per parameter on the device instead
// of 6 (2 with the swap); both as the tracker shows by its numbers. Checkpoints of either load into the other and
// training goes on bit for bit. reuse_fp32_param with float32 is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>

#include "engine/train_engine.h"
#include "engine_fixture.h"
#include "parallel/equivalence_checks.h"
#include "support/scratch_folder.h"
#include "support/test_support.h"

namespace rf::engine {
namespace {

using parallel_testing::step_micro_batches;
using parallel_testing::token_mean_nll;

constexpr int kNumSteps = 3;

model::ModelConfig model_config() { return parallel_testing::small_model_config(model::Arch::qwen3, false, 2, 2); }

// An engine of `config` on its own tracker, its weights drawn from one seed.
struct Harness : engine_testing::EngineEnv {
  TrainEngine engine;

  explicit Harness(const EngineConfig& config)
      : engine(config, engine_testing::adam(1e-2), model_config(), kernels, parallel, tracker, 64) {
    engine.init_random_weights(7);
  }
  double forward_backward(int step) {
    return engine.forward_backward(step_micro_batches(step, 0, 4), token_mean_nll, ForwardOnly::no).loss;
  }
};

EngineConfig engine_config(const std::string& dtype) {
  EngineConfig c;
  c.dtype = dtype;
  return c;
}

constexpr int64_t kSliceNumel = 1001;  // odd: slices cut through parameters and the last one is short

EngineConfig swapped(EngineConfig c) {
  c.swap_optimizer = true;
  c.bucket_size = kSliceNumel;
  return c;
}

EngineConfig reusing(EngineConfig c) {
  c.reuse_fp32_param = true;
  c.bucket_size = kSliceNumel;
  return c;
}

int64_t allocated_bytes(int64_t numel, DType dtype) { return (numel * int64_t(dtype_size(dtype)) + 63) / 64 * 64; }

void expect_same_bits(TensorView actual, TensorView expected, const std::string& what) {
  ASSERT_EQ(actual.nbytes(), expected.nbytes()) << what;
  EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), actual.nbytes()), 0) << what;
}

// Weights (masters and the copy the model reads) and moments, bit for bit.
void expect_same_state(TrainEngine& actual, TrainEngine& expected, const std::string& what) {
  expect_same_bits(actual.master_weights().flat(), expected.master_weights().flat(), what + ": master weights");
  expect_same_bits(actual.compute_weights().flat(), expected.compute_weights().flat(), what + ": compute weights");
  expect_same_bits(actual.optimizer().exp_avg(), expected.optimizer().exp_avg(), what + ": exp_avg");
  expect_same_bits(actual.optimizer().exp_avg_sq(), expected.optimizer().exp_avg_sq(), what + ": exp_avg_sq");
}

// kNumSteps steps of `actual` and `plain` give the same losses, grad norms, weights and moments bit for bit, also
// with everything offloaded between the steps (what is on the host tier already has nothing to move).
void expect_trains_alike(Harness& actual, Harness& plain) {
  for (int step = 0; step < kNumSteps; ++step) {
    EXPECT_EQ(actual.forward_backward(step), plain.forward_backward(step));
    EXPECT_EQ(actual.engine.optimizer_step(), plain.engine.optimizer_step());
    plain.engine.lr_step();
    actual.engine.lr_step();
    expect_same_state(actual.engine, plain.engine, "step " + std::to_string(step));
    actual.engine.offload(OffloadSet::all());
  }
  actual.engine.onload(OffloadSet::all());
  expect_same_state(actual.engine, plain.engine, "after an offload round trip");
}

TEST(SwapOptimizer, TrainsBitForBitAsThePlainPath) {
  for (const char* dtype : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    Harness plain(engine_config(dtype)), swap(swapped(engine_config(dtype)));
    expect_trains_alike(swap, plain);
  }
}

// The device tier's peak during forward and backward drops by exactly the moments' bytes (and the bf16 run's
// f32 masters'), which sit on the host tier; during the step only the two slices' stages come to the device.
TEST(SwapOptimizer, TheDevicePeakOfForwardAndBackwardDropsByTheSwappedState) {
  for (const char* dtype : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    Harness plain(engine_config(dtype)), swap(swapped(engine_config(dtype)));
    int64_t moments = 0;
    for (Tensor* t : plain.engine.optimizer().state_tensors()) moments += int64_t(t->allocated_bytes());
    const int64_t masters = dtype == std::string("bfloat16")
                                ? allocated_bytes(plain.engine.master_weights().layout().total_numel(), DType::f32)
                                : 0;
    for (Harness* h : {&plain, &swap}) {
      h->forward_backward(0);
      h->engine.optimizer_step();
      h->tracker.reset_peaks();
      h->forward_backward(1);
    }
    const int64_t plain_peak = plain.tracker.peak(MemoryTier::device);
    const int64_t swap_peak = swap.tracker.peak(MemoryTier::device);
    std::cout << "[ swap     ] " << dtype << ": device peak of forward+backward " << format_bytes(plain_peak)
              << " -> " << format_bytes(swap_peak) << " (moments " << format_bytes(moments) << ", masters "
              << format_bytes(masters) << " on the host tier)\n";
    EXPECT_EQ(plain_peak - swap_peak, moments + masters);
    EXPECT_EQ(swap.tracker.peak(MemoryTier::device, MemoryCategory::optimizer), 0);
    EXPECT_EQ(swap.tracker.current(MemoryTier::host, MemoryCategory::optimizer), moments);
    EXPECT_EQ(swap.tracker.current(MemoryTier::host, MemoryCategory::params), masters);
    // The step stages two slices: moments (and masters) of those only.
    swap.tracker.reset_peaks();
    swap.engine.optimizer_step();
    const int64_t stage = allocated_bytes(kSliceNumel, DType::f32);
    EXPECT_EQ(swap.tracker.peak(MemoryTier::device, MemoryCategory::optimizer), 2 * 2 * stage);
    EXPECT_EQ(swap.tracker.current(MemoryTier::device, MemoryCategory::optimizer), 0);
    EXPECT_LT(swap.tracker.peak(MemoryTier::device, MemoryCategory::optimizer), moments / 4);
  }
}

TEST(ReuseFp32Param, TrainsBitForBitAsThePlainBf16Path) {
  for (const EngineConfig& config : {reusing(engine_config("bfloat16")), swapped(reusing(engine_config("bfloat16")))}) {
    SCOPED_TRACE(config.swap_optimizer ? "with swap_optimizer" : "alone");
    Harness plain(engine_config("bfloat16")), reuse(config);
    expect_trains_alike(reuse, plain);  // master_weights() joins the split masters
  }
}

// The weights on the device tier: 4 bytes per parameter (the bf16 copy and the remainders) instead of 6 (the f32
// masters and the bf16 copy); with the swap as well, only the bf16 copy. The step adds its two f32 stages.
TEST(ReuseFp32Param, TheDeviceTiersWeightsDropByTheBf16Copy) {
  Harness plain(engine_config("bfloat16")), reuse(reusing(engine_config("bfloat16"))),
      both(swapped(reusing(engine_config("bfloat16"))));
  const int64_t N = plain.engine.master_weights().layout().total_numel();
  for (Harness* h : {&plain, &reuse, &both}) {
    h->forward_backward(0);
    h->engine.optimizer_step();
    h->tracker.reset_peaks();
    h->forward_backward(1);
  }
  const int64_t f32 = allocated_bytes(N, DType::f32), half = allocated_bytes(N, DType::bf16);
  const int64_t plain_params = plain.tracker.peak(MemoryTier::device, MemoryCategory::params);
  const int64_t reuse_params = reuse.tracker.peak(MemoryTier::device, MemoryCategory::params);
  const int64_t both_params = both.tracker.peak(MemoryTier::device, MemoryCategory::params);
  std::cout << "[ reuse    ] " << N << " parameters: device weights during forward+backward "
            << format_bytes(plain_params)
            << " -> " << format_bytes(reuse_params) << " (reuse_fp32_param), " << format_bytes(both_params)
            << " (with swap_optimizer); device peak " << format_bytes(plain.tracker.peak(MemoryTier::device)) << " -> "
            << format_bytes(reuse.tracker.peak(MemoryTier::device)) << ", "
            << format_bytes(both.tracker.peak(MemoryTier::device)) << "\n";
  EXPECT_EQ(plain_params, f32 + half);
  EXPECT_EQ(reuse_params, 2 * half);
  EXPECT_EQ(both_params, half);
  EXPECT_EQ(plain.tracker.peak(MemoryTier::device) - reuse.tracker.peak(MemoryTier::device), f32 - half);
  EXPECT_EQ(both.tracker.current(MemoryTier::host, MemoryCategory::params), half) << "the remainders";
  reuse.tracker.reset_peaks();
  reuse.engine.optimizer_step();
  EXPECT_EQ(reuse.tracker.peak(MemoryTier::device, MemoryCategory::params),
            2 * half + 2 * allocated_bytes(kSliceNumel, DType::f32));
  EXPECT_EQ(reuse.tracker.current(MemoryTier::device, MemoryCategory::params), 2 * half);
}

class OptimizerMemoryCheckpoint : public rf::testing::ScratchFolderTest {
 protected:
  void save(TrainEngine& engine, const std::string& name) {
    checkpoint::CheckpointWriter writer(path(name), 2);
    engine.save_checkpoint(writer, "actor");
    writer.commit();
  }
  void load(TrainEngine& engine, const std::string& name) {
    engine.load_checkpoint(checkpoint::CheckpointReader(path(name), 2), "actor");
  }
};

// A checkpoint saved with swap_optimizer and reuse_fp32_param is the plain path's (the joined f32 masters, the
// moments from the host tier), and one of the plain path loads into an engine with both: a step after either
// load is the plain path's step, bit for bit.
TEST_F(OptimizerMemoryCheckpoint, LoadsIntoThePlainPathAndBack) {
  Harness plain(engine_config("bfloat16")), both(swapped(reusing(engine_config("bfloat16"))));
  for (int step = 0; step < 2; ++step)
    for (Harness* h : {&plain, &both}) {
      h->forward_backward(step);
      h->engine.optimizer_step();
    }
  save(plain.engine, "plain");
  save(both.engine, "both");
  Harness plain_from_both(engine_config("bfloat16")), both_from_plain(swapped(reusing(engine_config("bfloat16"))));
  load(plain_from_both.engine, "both");
  load(both_from_plain.engine, "plain");
  for (Harness* h : {&plain, &plain_from_both, &both_from_plain}) {
    h->forward_backward(2);
    h->engine.optimizer_step();
  }
  expect_same_state(plain_from_both.engine, plain.engine, "plain path from the checkpoint of both");
  expect_same_state(both_from_plain.engine, plain.engine, "both from the plain path's checkpoint");
}

TEST(ReuseFp32Param, IsRefusedWithFloat32) {
  EngineConfig config = reusing(engine_config("float32"));
  rf::testing::expect_config_error([&] { config.validate(); }, "reuse_fp32_param", "true needs dtype: bfloat16");
}

}  // namespace
}  // namespace rf::engine
