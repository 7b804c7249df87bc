// MoE router replay through CausalLm (model_inputs.h's replay_experts_NLk / record_experts_NLk): the routing a
// forward records, replayed, gives the same outputs and gradients bit for bit, in training forwards (with and
// without full recompute) and forward-only passes; other experts change the outputs; replay on a dense model and a
// record of the wrong shape are refused. (forward_paged's record: tests/engine/rollout/rollout_engine_test.cpp.)
// Legend: N tokens, L MoE layers, k experts per token.
#include <gtest/gtest.h>

#include <cstring>

#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using testing::ModelUnderTest;

// Qwen2-MoE's micro config: both layers sparse (5 experts, top 2) with the gated shared expert.
ModelConfig replay_config() { return testing::micro_config(Arch::qwen2_moe, false); }

Tensor experts_tensor(int64_t N, const ModelConfig& c) {
  Tensor t({N, 2, c.moe.num_experts_per_tok}, DType::i32);
  std::fill_n(t.data<int32_t>(), t.numel(), -7);
  return t;
}

bool bit_equal(TensorView a, TensorView b) {
  return a.numel() == b.numel() && std::memcmp(a.raw(), b.raw(), size_t(a.nbytes())) == 0;
}

struct ReplayRun {
  Tensor logp, record;
  std::vector<Tensor> grads;
};

// One forward (recording) and backward of the fd documents, replaying `replay` when given.
ReplayRun run(const ModelConfig& config, const RecomputePolicy& recompute, TensorView replay) {
  ModelUnderTest m(config, DType::f32, testing::fast_kernels(), 64, recompute);
  testing::randomize_weights(m.params, 5);
  const PackedSequences packed = testing::fd_documents();
  const int64_t N = packed.tokens_N.numel();
  ReplayRun r;
  r.record = experts_tensor(N, config);
  ModelInputs in = packed.inputs();
  in.replay_experts_NLk = replay;
  in.record_experts_NLk = r.record;
  const ModelOutputs out = m.model.forward(in, EntropyOutput::skip);
  r.logp = clone(out.logp_N, DType::f32);
  const testing::LossWeights w = testing::random_loss_weights(packed, DType::f32, 3);
  OutputGrads grads;
  grads.dlogp_N = w.a_N;
  m.grads.zero();
  m.model.backward(grads);
  r.grads = testing::grads_f64(m);
  return r;
}

TEST(MoeReplay, ReplayingTheRecordedRoutingIsBitExactInTraining) {
  const ModelConfig config = replay_config();
  for (const bool full : {false, true}) {
    RecomputePolicy recompute;
    recompute.full = full;
    recompute.num_layers = full ? 1 : 0;
    SCOPED_TRACE(full ? "full recompute" : "no recompute");
    const ReplayRun free_run = run(config, recompute, TensorView());
    for (int64_t i = 0; i < free_run.record.numel(); ++i) {
      const int32_t e = free_run.record.data<int32_t>()[i];
      ASSERT_TRUE(e >= 0 && e < config.moe.num_experts) << "entry " << i << " not recorded: " << e;
    }
    const ReplayRun replayed = run(config, recompute, free_run.record);
    EXPECT_TRUE(bit_equal(replayed.logp, free_run.logp));
    EXPECT_TRUE(bit_equal(replayed.record, free_run.record)) << "the record of a replay is the replayed routing";
    ASSERT_EQ(replayed.grads.size(), free_run.grads.size());
    for (size_t t = 0; t < free_run.grads.size(); ++t)
      EXPECT_TRUE(bit_equal(replayed.grads[t], free_run.grads[t])) << t;
  }
}

TEST(MoeReplay, OtherExpertsChangeTheOutputsAndAreRecordedAsReplayed) {
  const ModelConfig config = replay_config();
  const ReplayRun free_run = run(config, {}, TensorView());
  // Every token's first-layer experts moved by one (mod E); the second layer's kept.
  Tensor moved = clone(free_run.record, DType::i32);
  const int64_t k = config.moe.num_experts_per_tok, E = config.moe.num_experts;
  for (int64_t n = 0; n < moved.size(0); ++n)
    for (int64_t i = 0; i < k; ++i) {
      int32_t& e = moved.data<int32_t>()[n * 2 * k + i];
      e = int32_t((e + 1) % E);
    }
  const ReplayRun replayed = run(config, {}, moved);
  int64_t differ = 0;
  for (int64_t n = 0; n < replayed.logp.numel(); ++n)
    differ += replayed.logp.data<float>()[n] != free_run.logp.data<float>()[n];
  EXPECT_GT(differ, replayed.logp.numel() / 2);
  // The record lists each token's replayed experts in increasing order.
  for (int64_t n = 0; n < moved.size(0); ++n) {
    std::vector<int32_t> want(moved.data<int32_t>() + n * 2 * k, moved.data<int32_t>() + n * 2 * k + k);
    std::sort(want.begin(), want.end());
    const std::vector<int32_t> got(replayed.record.data<int32_t>() + n * 2 * k,
                                   replayed.record.data<int32_t>() + n * 2 * k + k);
    EXPECT_EQ(got, want) << "token " << n;
  }
}

TEST(MoeReplay, ForwardOnlyPassesRecordAndReplayToo) {
  const ModelConfig config = replay_config();
  ModelUnderTest m(config, DType::f32, testing::fast_kernels(), 64);
  testing::randomize_weights(m.params, 5);
  CausalLm::Activations forward_only = m.model.make_forward_only_activations();
  const PackedSequences packed = testing::fd_documents();
  const int64_t N = packed.tokens_N.numel();
  Tensor record = experts_tensor(N, config), again = experts_tensor(N, config);
  ModelInputs in = packed.inputs();
  in.record_experts_NLk = record;
  const Tensor logp = clone(m.model.forward(in, EntropyOutput::skip, forward_only, CausalLm::SavedFor::nothing).logp_N,
                            DType::f32);
  // The training forward routes the same way.
  in.record_experts_NLk = again;
  const Tensor train_logp = clone(m.model.forward(in, EntropyOutput::skip).logp_N, DType::f32);
  EXPECT_TRUE(bit_equal(again, record));
  EXPECT_TRUE(bit_equal(train_logp, logp));
  in.replay_experts_NLk = record;
  const Tensor replayed =
      clone(m.model.forward(in, EntropyOutput::skip, forward_only, CausalLm::SavedFor::nothing).logp_N, DType::f32);
  EXPECT_TRUE(bit_equal(replayed, logp));
  EXPECT_TRUE(bit_equal(again, record));
}

TEST(MoeReplay, RefusesDenseModelsAndWrongShapes) {
  const PackedSequences packed = testing::fd_documents();
  const int64_t N = packed.tokens_N.numel();
  {
    ModelUnderTest dense(testing::micro_config(Arch::qwen3, false), DType::f32, testing::fast_kernels(), 64);
    Tensor experts({N, 1, 2}, DType::i32);
    std::fill_n(experts.data<int32_t>(), experts.numel(), 0);
    ModelInputs in = packed.inputs();
    in.replay_experts_NLk = experts;
    rf::testing::expect_error_containing([&] { dense.model.forward(in, EntropyOutput::skip); }, "dense model");
  }
  const ModelConfig config = replay_config();
  ModelUnderTest m(config, DType::f32, testing::fast_kernels(), 64);
  Tensor short_record({N - 1, 2, 2}, DType::i32);
  ModelInputs in = packed.inputs();
  in.record_experts_NLk = short_record;
  rf::testing::expect_error_containing([&] { m.model.forward(in, EntropyOutput::skip); }, "record_experts_NLk");
}

}  // namespace
}  // namespace rf::model
