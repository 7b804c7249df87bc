// Idle-role offload (issue #9, acceptance 3): offloading any part of a TrainEngine's or InferEngine's
// state (or releasing its activation buffers) between stages changes no result bit, moves exactly that part's bytes from the tracker's
// device tier to its host tier, lowers the device peak of what runs meanwhile, and fails cleanly,
// keeping the state, when the device budget cannot take it back.
// Legend: N tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>

#include "engine/infer_engine.h"
#include "engine/train_engine.h"
#include "parallel/equivalence_checks.h"
#include "support/test_support.h"

namespace rf::engine {
namespace {

using parallel_testing::step_micro_batches;
using parallel_testing::token_mean_nll;

constexpr MemoryTier kDevice = MemoryTier::device;
constexpr MemoryTier kHost = MemoryTier::host;

model::ModelConfig model_config() { return parallel_testing::small_model_config(model::Arch::qwen2, false, 2, 2); }

EngineConfig engine_config(const std::string& dtype) {
  EngineConfig c;
  c.dtype = dtype;
  return c;
}

struct Harness {
  kernels::KernelRegistry kernels;
  dist::ParallelContext parallel = dist::ParallelContext::single_process();
  MemoryTracker tracker;
  TrainEngine engine;

  explicit Harness(const std::string& dtype)
      : engine(engine_config(dtype), adam(), model_config(), kernels, parallel, tracker, 64) {
    engine.init_random_weights(7);
  }
  static optim::OptimConfig adam() {
    optim::OptimConfig c;
    c.lr = 1e-2;
    c.lr_decay_steps = 100;
    return c;
  }
  double forward_backward(int step) {
    return engine.forward_backward(step_micro_batches(step, 0, 4), token_mean_nll, ForwardOnly::no).loss;
  }
  Tensor log_probs(int step) {
    auto r = engine.forward_backward(step_micro_batches(step, 0, 1), token_mean_nll, ForwardOnly::yes);
    return clone(r.outputs.at(0).get("log_probs"), DType::f32);
  }
  int64_t device(MemoryCategory c) const { return tracker.current(kDevice, c); }
  int64_t host(MemoryCategory c) const { return tracker.current(kHost, c); }
};

void expect_same_bits(TensorView actual, TensorView expected, const std::string& what) {
  ASSERT_EQ(actual.nbytes(), expected.nbytes()) << what;
  EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), actual.nbytes()), 0) << what;
}

// Copies of everything offload moves (the compute copy is compared through the log-probs it gives).
struct Snapshot {
  Tensor master, grads, exp_avg, exp_avg_sq;
  explicit Snapshot(TrainEngine& e)
      : master(clone(e.master_weights().flat(), DType::f32)),
        grads(clone(e.grads().flat(), DType::f32)),
        exp_avg(clone(e.optimizer().exp_avg(), DType::f32)),
        exp_avg_sq(clone(e.optimizer().exp_avg_sq(), DType::f32)) {}
  void expect_equals(TrainEngine& e, const std::string& what) const {
    expect_same_bits(e.master_weights().flat(), master, what + ": master weights");
    expect_same_bits(e.grads().flat(), grads, what + ": grads");
    expect_same_bits(e.optimizer().exp_avg(), exp_avg, what + ": exp_avg");
    expect_same_bits(e.optimizer().exp_avg_sq(), exp_avg_sq, what + ": exp_avg_sq");
  }
};

TEST(TrainEngineOffload, RoundTripAndTheStepsAfterAreBitIdentical) {
  for (const std::string dtype : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    Harness plain(dtype), offloaded(dtype);
    for (Harness* h : {&plain, &offloaded}) {
      h->forward_backward(0);
      h->engine.optimizer_step();
      h->engine.lr_step();
      h->forward_backward(1);  // the gradients are mid-step, not zero
    }
    const Snapshot before(offloaded.engine);
    offloaded.engine.offload(OffloadSet::all());
    EXPECT_EQ(offloaded.engine.offloaded(), OffloadSet::all());
    offloaded.engine.onload(OffloadSet::all());
    EXPECT_EQ(offloaded.engine.offloaded(), OffloadSet{});
    before.expect_equals(offloaded.engine, "after a round trip");

    // The trainer's pattern: offload after each stage, the next stage brings back what it needs.
    offloaded.engine.offload(OffloadSet::all());
    EXPECT_EQ(offloaded.engine.optimizer_step(), plain.engine.optimizer_step());
    plain.engine.lr_step();
    offloaded.engine.lr_step();
    for (int step = 2; step < 4; ++step) {
      offloaded.engine.offload(OffloadSet::all());
      expect_same_bits(offloaded.log_probs(step), plain.log_probs(step), "compute_log_prob after offload");
      EXPECT_EQ(offloaded.engine.offloaded(), (OffloadSet{.grads = true, .optimizer = true}));
      offloaded.engine.offload(OffloadSet::all());
      EXPECT_EQ(offloaded.forward_backward(step), plain.forward_backward(step));
      offloaded.engine.offload({.params = true, .optimizer = true});
      EXPECT_EQ(offloaded.engine.optimizer_step(), plain.engine.optimizer_step());
      plain.engine.lr_step();
      offloaded.engine.lr_step();
    }
    offloaded.engine.offload(OffloadSet::all());
    Snapshot(plain.engine).expect_equals(offloaded.engine, "two steps later");
  }
}

TEST(TrainEngineOffload, TheTrackerShowsExactlyTheOffloadedBytesMove) {
  Harness h("bfloat16");
  h.forward_backward(0);
  h.engine.optimizer_step();
  const int64_t params = h.device(MemoryCategory::params), grads = h.device(MemoryCategory::grads),
                optimizer = h.device(MemoryCategory::optimizer), device = h.tracker.current(kDevice);
  const int64_t numel = h.engine.num_parameters();
  EXPECT_GE(params, numel * (4 + 2));  // the f32 master and the bf16 copy
  EXPECT_GE(grads, numel * 4);
  EXPECT_GE(optimizer, numel * 8);  // two f32 moments
  EXPECT_EQ(h.tracker.current(kHost), 0);

  h.engine.offload(OffloadSet::all());
  EXPECT_EQ(h.device(MemoryCategory::params), 0);
  EXPECT_EQ(h.device(MemoryCategory::grads), 0);
  EXPECT_EQ(h.device(MemoryCategory::optimizer), 0);
  EXPECT_EQ(h.tracker.current(kDevice), device - params - grads - optimizer);
  EXPECT_EQ(h.host(MemoryCategory::params), params);
  EXPECT_EQ(h.host(MemoryCategory::optimizer), optimizer);
  EXPECT_EQ(h.host(MemoryCategory::grads), 0);  // zero after the step: dropped, not copied
  std::cout << "[ offload  ] after a step, offload all: " << h.tracker.summary() << "\n";
  h.engine.onload(OffloadSet::all());
  EXPECT_EQ(h.tracker.current(kDevice), device);
  EXPECT_EQ(h.tracker.current(kHost), 0);

  // Mid-step gradients are copied.
  h.forward_backward(1);
  h.engine.offload({.grads = true});
  EXPECT_EQ(h.host(MemoryCategory::grads), grads);
  EXPECT_EQ(h.tracker.current(kDevice), device - grads);
}

TEST(TrainEngineOffload, LowersTheDevicePeakOfWhatRunsMeanwhile) {
  // step, offload all, then something else allocates X on the device (the rollout's KV cache, say).
  auto device_peak = [](bool offload) {
    Harness h("bfloat16");
    h.forward_backward(0);
    h.engine.optimizer_step();
    const int64_t state = h.device(MemoryCategory::params) + h.device(MemoryCategory::grads) +
                          h.device(MemoryCategory::optimizer);
    if (offload) h.engine.offload(OffloadSet::all());
    const Tensor x({state / 2}, DType::f32, {&h.tracker, kDevice, MemoryCategory::kv_cache});  // 2x the state
    return std::pair{h.tracker.peak(kDevice), state};
  };
  const auto [without, state] = device_peak(false);
  const auto [with, same_state] = device_peak(true);
  std::cout << "[ offload  ] device peak without offload " << format_bytes(without) << ", with " << format_bytes(with)
            << " (state " << format_bytes(state) << ")\n";
  EXPECT_EQ(state, same_state);
  EXPECT_LT(with, without);
  EXPECT_EQ(without - with, state);  // the peak is at X's allocation, and offload moved all of the state
}

TEST(TrainEngineOffload, OnloadBeyondTheDeviceBudgetFailsAndKeepsTheState) {
  Harness h("bfloat16");
  h.forward_backward(0);
  h.engine.optimizer_step();
  h.forward_backward(1);
  const Snapshot before(h.engine);
  const Tensor log_probs = h.log_probs(2);
  const int64_t params = h.device(MemoryCategory::params);
  h.engine.offload(OffloadSet::all());
  const int64_t device = h.tracker.current(kDevice), host = h.tracker.current(kHost);

  // Room for the f32 master (2/3 of the params' bytes) but not also the bf16 copy.
  h.tracker.set_budget(kDevice, device + params - 1);
  rf::testing::expect_error_containing([&] { h.engine.onload({.params = true}); }, "out of device memory");
  rf::testing::expect_error_containing([&] { h.log_probs(2); }, "out of device memory");
  EXPECT_EQ(h.engine.offloaded(), OffloadSet::all());
  EXPECT_EQ(h.tracker.current(kDevice), device);
  EXPECT_EQ(h.tracker.current(kHost), host);

  h.tracker.set_budget(kDevice, MemoryTracker::kNoBudget);
  h.engine.onload(OffloadSet::all());
  before.expect_equals(h.engine, "after a refused onload");
  expect_same_bits(h.log_probs(2), log_probs, "log-probs after a refused onload");
}

// release_activations: between passes the activation buffers' bytes leave the tracker (no copy: a pass's
// activations are dead once it ends), the next pass takes them back, and every result is bit for bit what
// an engine that kept them computes.
TEST(TrainEngineOffload, ReleasedActivationsChangeNoResultAndLeaveTheTracker) {
  Harness plain("bfloat16"), released("bfloat16");
  const int64_t activations = released.device(MemoryCategory::activations),
                workspace = released.device(MemoryCategory::workspace);
  ASSERT_GT(activations, 0);
  for (int step = 0; step < 3; ++step) {
    released.engine.offload({.activations = true});
    EXPECT_EQ(released.engine.offloaded(), OffloadSet{.activations = true});
    EXPECT_EQ(released.device(MemoryCategory::activations), 0);
    EXPECT_LT(released.device(MemoryCategory::workspace), workspace);  // what grows on demand stays
    EXPECT_EQ(released.tracker.current(kHost), 0);                   // nothing copied
    expect_same_bits(released.log_probs(step), plain.log_probs(step), "log-probs after a release");
    EXPECT_EQ(released.device(MemoryCategory::activations), activations);  // taken back by the pass
    released.engine.offload({.activations = true});
    EXPECT_EQ(released.forward_backward(step), plain.forward_backward(step));
    EXPECT_EQ(released.engine.optimizer_step(), plain.engine.optimizer_step());
    plain.engine.lr_step();
    released.engine.lr_step();
  }
  Snapshot(plain.engine).expect_equals(released.engine, "three steps with released activations");
}

TEST(InferEngineOffload, RoundTripAndLogProbs) {
  Harness trainer("bfloat16");
  MemoryTracker tracker;
  InferEngine ref(engine_config("bfloat16"), model_config(), trainer.kernels, trainer.parallel, tracker, 64);
  trainer.engine.export_weights([&](const std::string& name, TensorView full) { ref.update_weights(name, full); });
  auto log_probs = [&] {
    return ref.compute_log_prob(step_micro_batches(0, 0, 4), 1.0, model::EntropyOutput::compute);
  };
  const std::vector<TensorMap> before = log_probs();
  const Tensor weights = clone(ref.weights().flat(), DType::bf16);
  const int64_t params = tracker.current(kDevice, MemoryCategory::params);
  ASSERT_GE(params, trainer.engine.num_parameters() * 2);

  ref.offload({.params = true});
  EXPECT_TRUE(ref.offloaded());
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::params), 0);
  EXPECT_EQ(tracker.current(kHost, MemoryCategory::params), params);
  ref.onload();
  EXPECT_FALSE(ref.offloaded());
  EXPECT_EQ(tracker.current(kHost), 0);
  expect_same_bits(ref.weights().flat(), weights, "weights after a round trip");

  ref.offload({.params = true});
  const std::vector<TensorMap> after = log_probs();  // onloads
  EXPECT_FALSE(ref.offloaded());
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    expect_same_bits(after[i].get("log_probs"), before[i].get("log_probs"), "log_probs");
    expect_same_bits(after[i].get("entropy"), before[i].get("entropy"), "entropy");
  }
  // Released activations too: the next pass takes them back and computes the same bits.
  const int64_t activations = tracker.current(kDevice, MemoryCategory::activations);
  ref.offload({.params = true, .activations = true});
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::activations), 0);
  const std::vector<TensorMap> released = log_probs();
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::activations), activations);
  for (size_t i = 0; i < before.size(); ++i)
    expect_same_bits(released[i].get("log_probs"), before[i].get("log_probs"), "log_probs after a release");
  // A weight update onloads first, so the weights it does not touch are still there.
  ref.offload({.params = true});
  ref.update_weights("model.norm.weight", trainer.engine.master_weights().get("model.norm.weight"));
  expect_same_bits(ref.weights().flat(), weights, "weights after an update while offloaded");
}

}  // namespace
}  // namespace rf::engine
