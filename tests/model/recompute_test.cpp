// Full activation recompute (model/recompute_policy.h): the groups each method makes, and a model that
// recomputes gives bit for bit the outputs and gradients of one that saves everything, f32 and bf16, for
// uniform groups (of 1, of 2, larger than the chunk) and block, with two micro-batches in flight at once
// (forward A, forward B, backward B, backward A: the one group scratch is shared by both), while its
// per-micro-batch activations shrink to the groups' inputs.
#include <gtest/gtest.h>

#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using Groups = std::vector<std::pair<int64_t, int64_t>>;

TEST(RecomputeGroups, UniformGroupsConsecutiveLayersAndBlockTakesTheFirstOnes) {
  EXPECT_EQ(recompute_groups({}, 4).groups, Groups{});
  EXPECT_EQ(recompute_groups({.full = true, .num_layers = 2}, 5).groups, (Groups{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(recompute_groups({.full = true, .num_layers = 8}, 3).groups, (Groups{{0, 3}}));
  EXPECT_EQ(recompute_groups({.full = true, .method = RecomputeMethod::block, .num_layers = 2}, 5).groups,
            (Groups{{0, 1}, {1, 2}}));
  EXPECT_EQ(recompute_groups({.full = true, .method = RecomputeMethod::block, .num_layers = 9}, 2).groups,
            (Groups{{0, 1}, {1, 2}}));
  const RecomputeGroups g = recompute_groups({.full = true, .num_layers = 2}, 5);
  EXPECT_EQ(g.largest(), 2);
  EXPECT_TRUE(g.recomputes(3));
  EXPECT_EQ(*g.group_of(3), (std::pair<int64_t, int64_t>{2, 4}));
}

struct InFlightRun {
  std::vector<Tensor> logp;  // per micro-batch
  Tensor grads;
  int64_t activation_bytes = 0;  // one micro-batch's saved activations
};

// Two micro-batches in flight, each with its own Activations, backward in reverse order.
InFlightRun run_two_in_flight(const ModelConfig& config, DType dtype, const RecomputePolicy& recompute) {
  std::vector<PackedSequences> batches;
  batches.push_back(pack_sequences({{1, 2, 3, 4, 5}, {6, 7, 8}}));
  batches.push_back(pack_sequences({{9, 10, 11}, {12, 13, 14, 15, 16, 17}}));
  testing::ModelUnderTest m(config, dtype, testing::fast_kernels(), 16, recompute);
  testing::randomize_weights(m.params, 11);
  m.grads.zero();
  InFlightRun run;
  std::vector<CausalLm::Activations> saved;
  for (size_t b = 0; b < batches.size(); ++b) saved.push_back(m.model.make_activations());
  run.activation_bytes = saved[0].bytes();
  std::vector<testing::LossWeights> weights;
  for (size_t b = 0; b < batches.size(); ++b) {
    weights.push_back(testing::random_loss_weights(batches[b], stat_dtype_for(dtype), 3 + b));
    run.logp.push_back(clone(m.model.forward(batches[b].inputs(), EntropyOutput::compute, saved[b]).logp_N, DType::f64));
  }
  for (size_t b = batches.size(); b-- > 0;)
    m.model.backward({weights[b].a_N, weights[b].b_N}, kernels::Accumulate::add, saved[b]);
  run.grads = clone(m.grads.flat(), DType::f64);
  return run;
}

TEST(FullRecompute, GivesTheSameBitsAsSavingEverything) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.num_hidden_layers = 3;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const InFlightRun plain = run_two_in_flight(config, dtype, {});
    for (const RecomputePolicy& policy :
         {RecomputePolicy{.full = true, .num_layers = 1}, RecomputePolicy{.full = true, .num_layers = 2},
          RecomputePolicy{.full = true, .num_layers = 5},
          RecomputePolicy{.full = true, .method = RecomputeMethod::block, .num_layers = 2}}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), describe(policy)));
      const InFlightRun recomputed = run_two_in_flight(config, dtype, policy);
      for (size_t b = 0; b < plain.logp.size(); ++b)
        rf::testing::expect_close(recomputed.logp[b], plain.logp[b], 0.0, 0.0, "log-probs");
      rf::testing::expect_close(recomputed.grads, plain.grads, 0.0, 0.0, "gradients");
      EXPECT_LT(recomputed.activation_bytes, plain.activation_bytes);
    }
  }
}

TEST(FullRecompute, KeepsOnlyEachGroupsInputPerMicroBatch) {
  ModelConfig config = testing::micro_config(Arch::llama, false);
  config.num_hidden_layers = 4;
  auto layer_bytes = [&](const RecomputePolicy& policy) {
    testing::ModelUnderTest m(config, DType::f32, testing::fast_kernels(), 16, policy);
    return m.model.make_layer_activations().bytes();
  };
  const int64_t residual = 16 * config.hidden_size * 4;  // one [N, C] f32 tensor
  // Uniform groups of 2: the inputs of layers 0 and 2 and the chunk's output.
  EXPECT_EQ(layer_bytes({.full = true, .num_layers = 2}), 3 * residual);
  // Every layer alone: each layer's input and the output.
  EXPECT_EQ(layer_bytes({.full = true, .num_layers = 1}), 5 * residual);
  // Block of the first 3: layer 3 saves everything as without recompute.
  const int64_t plain = layer_bytes({});
  const int64_t per_layer = (plain - residual) / 4;
  EXPECT_EQ(layer_bytes({.full = true, .method = RecomputeMethod::block, .num_layers = 3}), 4 * residual + per_layer);
}

}  // namespace
}  // namespace rf::model
