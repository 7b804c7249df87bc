// Every coordinate of every parameter of micro models (each architecture, MoE ones included, tied and untied, GQA)
// against finite differences of the f64 `ref` forward, through both outputs (log-prob and
// entropy), at temperature != 1, over two packed documents; and through layers whose forward is recomputed in
// backward (full recompute, uniform and block) or whose discarded tensors are (selective recompute of every module,
// on the training attention and on the batch-invariant one).
#include <gtest/gtest.h>

#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

// Every tensor selective recompute can discard (mlp covers the activation function's).
constexpr SelectiveRecompute kDiscardAll{.core_attn = true, .layernorm = true, .activation = true, .mlp = true};

struct MicroCase {
  Arch arch;
  bool tied;
  // The forward on the rollout's paged attention (model/paged_order_attention.h), the backward on
  // the training one without RoPE, then RoPE's backward.
  bool batch_invariant = false;
  RecomputePolicy recompute = {};
};

class MicroModelGradients : public ::testing::TestWithParam<MicroCase> {};

TEST_P(MicroModelGradients, EveryCoordinateMatchesFiniteDifferences) {
  const MicroCase c = GetParam();
  const kernels::KernelRegistry ref_kernels(
      kernels::KernelConfig{.optimization_level = 0, .batch_invariant = c.batch_invariant});
  const ModelConfig config = testing::micro_config(c.arch, c.tied);
  const PackedSequences packed = testing::fd_documents();
  const ModelInputs inputs = packed.inputs(0.8);
  testing::ModelUnderTest m(config, DType::f64, ref_kernels, packed.tokens_N.numel(), c.recompute);
  testing::randomize_weights(m.params, 77);
  const auto weights = testing::random_loss_weights(packed, DType::f64, 5);

  m.grads.zero();
  m.model.forward(inputs);
  m.model.backward({weights.a_N, weights.b_N});
  auto loss = [&] { return testing::weighted_loss(m.model.forward(inputs), weights); };
  for (const auto& e : m.params.layout().entries())
    rf::testing::expect_gradient_matches_fd(loss, m.params.get(e.name), m.grads.get(e.name), e.name);
}

INSTANTIATE_TEST_SUITE_P(Archs, MicroModelGradients,
                         ::testing::Values(MicroCase{Arch::llama, true}, MicroCase{Arch::llama, false},
                                           MicroCase{Arch::qwen2, true}, MicroCase{Arch::qwen2, false},
                                           MicroCase{Arch::qwen3, true}, MicroCase{Arch::qwen3, false},
                                           MicroCase{Arch::llama, true, true}, MicroCase{Arch::qwen3, false, true},
                                           MicroCase{Arch::qwen2, false, false, {.full = true, .num_layers = 2}},
                                           MicroCase{Arch::qwen3, true, false,
                                                     {.full = true, .method = RecomputeMethod::block, .num_layers = 1}},
                                           MicroCase{Arch::qwen3, false, false, {.selective = kDiscardAll}},
                                           MicroCase{Arch::llama, false, true, {.selective = kDiscardAll}},
                                           // MoE: a dense layer among sparse ones; the gated shared expert on the
                                           // batch-invariant path (recompute's bits: recompute_test.cpp)
                                           MicroCase{Arch::qwen3_moe, true}, MicroCase{Arch::qwen2_moe, false, true}),
                         [](const auto& info) {
                           const RecomputePolicy& r = info.param.recompute;
                           return arch_name(info.param.arch) + (info.param.tied ? "_tied" : "_untied") +
                                  (info.param.batch_invariant ? "_batch_invariant" : "") +
                                  (r.selective.any() ? "_recompute_selective"
                                   : !r.full         ? ""
                                   : r.method == RecomputeMethod::uniform ? "_recompute_uniform"
                                                                          : "_recompute_block");
                         });

}  // namespace
}  // namespace rf::model
