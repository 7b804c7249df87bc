// Activation recompute (model/recompute_policy.h): the groups each full method makes, and a model that
// recomputes gives bit for bit the outputs and gradients of one that saves everything, f32 and bf16, for
// uniform groups (of 1, of 2, larger than the chunk), block, and every selective module alone and together, on the
// training and the batch-invariant attention, with two micro-batches in flight at once (forward A, forward B,
// backward B, backward A: the one group scratch and the one discarded-tensor scratch are shared by both), while
// its per-micro-batch activations shrink. Activation offload of the first layers gives the same bits too, with two
// micro-batches in flight, while the device tier holds only two offloaded layers at once and the rest wait on the
// host tier. The activation plan (model/activation_plan.h) counts exactly what the model allocates, for each policy
// and with offload.
#include <gtest/gtest.h>

#include "model/activation_plan.h"
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
  int64_t device_peak = 0, host_peak = 0;  // the tracker's activations, from making the micro-batches' on
};

// Two micro-batches in flight, each with its own Activations, backward in reverse order.
InFlightRun run_two_in_flight(const ModelConfig& config, DType dtype, const RecomputePolicy& recompute,
                              const kernels::KernelRegistry& kernels = testing::fast_kernels(),
                              int64_t offloaded_layers = 0) {
  std::vector<PackedSequences> batches;
  batches.push_back(pack_sequences({{1, 2, 3, 4, 5}, {6, 7, 8}}));
  batches.push_back(pack_sequences({{9, 10, 11}, {12, 13, 14, 15, 16, 17}}));
  MemoryTracker tracker;
  testing::ModelUnderTest m(config, dtype, kernels, 16, recompute, &tracker);
  m.model.set_activation_offload(offloaded_layers);
  testing::randomize_weights(m.params, 11);
  m.grads.zero();
  InFlightRun run;
  tracker.reset_peaks();
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
  run.device_peak = tracker.peak(MemoryTier::device, MemoryCategory::activations);
  run.host_peak = tracker.peak(MemoryTier::host, MemoryCategory::activations);
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

// Each module alone and the combinations the issue names; mlp and activation together (mlp covers it).
std::vector<SelectiveRecompute> selective_policies() {
  return {{.core_attn = true},
          {.layernorm = true},
          {.activation = true},
          {.mlp = true},
          {.core_attn = true, .layernorm = true, .activation = true},
          {.core_attn = true, .layernorm = true, .activation = true, .mlp = true}};
}

TEST(SelectiveRecompute, GivesTheSameBitsAsSavingEverything) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.num_hidden_layers = 2;
  const kernels::KernelRegistry batch_invariant(kernels::KernelConfig{.batch_invariant = true});
  for (const kernels::KernelRegistry* kernels : {&testing::fast_kernels(), &batch_invariant})
    for (DType dtype : {DType::f32, DType::bf16}) {
      const InFlightRun plain = run_two_in_flight(config, dtype, {}, *kernels);
      for (const SelectiveRecompute& modules : selective_policies()) {
        const RecomputePolicy policy{.selective = modules};
        SCOPED_TRACE(fmt::format("{} {}{}", dtype_name(dtype), describe(policy),
                                 kernels->batch_invariant() ? " batch-invariant" : ""));
        const InFlightRun recomputed = run_two_in_flight(config, dtype, policy, *kernels);
        for (size_t b = 0; b < plain.logp.size(); ++b)
          rf::testing::expect_close(recomputed.logp[b], plain.logp[b], 0.0, 0.0, "log-probs");
        rf::testing::expect_close(recomputed.grads, plain.grads, 0.0, 0.0, "gradients");
        EXPECT_LT(recomputed.activation_bytes, plain.activation_bytes);
      }
    }
}

// Full recompute of the first layer with selective on the saving second one: both mechanisms in one chunk.
TEST(SelectiveRecompute, CombinesWithFullRecomputeOfOtherLayers) {
  ModelConfig config = testing::micro_config(Arch::llama, false);
  config.num_hidden_layers = 2;
  const InFlightRun plain = run_two_in_flight(config, DType::f32, {});
  const InFlightRun both = run_two_in_flight(
      config, DType::f32,
      {.full = true, .method = RecomputeMethod::block, .num_layers = 1, .selective = {.layernorm = true, .activation = true}});
  rf::testing::expect_close(both.grads, plain.grads, 0.0, 0.0, "gradients");
}

// MoE layers (one dense among them, or a gated shared expert) recompute to the same bits, whole (full) or their
// MoE block only (recompute_modules: moe, Megatron's moe_layer_recompute), and the plan counts what
// their blocks allocate, recompute groups mixing dense and MoE layers included.
TEST(Recompute, GivesTheSameBitsOnMoeLayers) {
  for (Arch arch : {Arch::qwen3_moe, Arch::qwen2_moe}) {
    ModelConfig config = testing::micro_config(arch, false);
    config.num_hidden_layers = 3;
    const InFlightRun plain = run_two_in_flight(config, DType::f32, {});
    for (const RecomputePolicy& policy :
         {RecomputePolicy{.full = true, .num_layers = 2},
          RecomputePolicy{.full = true, .method = RecomputeMethod::block, .num_layers = 1},
          RecomputePolicy{.selective = {.moe = true}},
          RecomputePolicy{.selective = {.core_attn = true, .moe = true}},
          RecomputePolicy{.full = true, .method = RecomputeMethod::block, .num_layers = 1,
                          .selective = {.moe = true}}}) {
      SCOPED_TRACE(fmt::format("{} {}", arch_name(arch), describe(policy)));
      const InFlightRun recomputed = run_two_in_flight(config, DType::f32, policy);
      for (size_t b = 0; b < plain.logp.size(); ++b)
        rf::testing::expect_close(recomputed.logp[b], plain.logp[b], 0.0, 0.0, "log-probs");
      rf::testing::expect_close(recomputed.grads, plain.grads, 0.0, 0.0, "gradients");
      EXPECT_LT(recomputed.activation_bytes, plain.activation_bytes);
    }
  }
}

TEST(ActivationPlan, CountsExactlyWhatAnMoeModelAllocates) {
  for (Arch arch : {Arch::qwen3_moe, Arch::qwen2_moe}) {
    ModelConfig config = testing::micro_config(arch, false);
    config.num_hidden_layers = 4;
    for (const RecomputePolicy& policy :
         {RecomputePolicy{}, RecomputePolicy{.full = true, .num_layers = 3},
          RecomputePolicy{.full = true, .num_layers = 2}, RecomputePolicy{.selective = {.moe = true}},
          RecomputePolicy{.selective = {.core_attn = true, .moe = true}}}) {
      SCOPED_TRACE(fmt::format("{} {}", arch_name(arch), describe(policy)));
      MemoryTracker tracker;
      testing::ModelUnderTest m(config, DType::bf16, testing::fast_kernels(), 24, policy, &tracker);
      const ActivationPlan plan =
          plan_activations(config, {m.model.span()}, m.model.activation_shape(), m.model.recompute_policy());
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::activations), plan.scratch_bytes());
      CausalLm::Activations saved = m.model.make_activations();
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::activations),
                plan.scratch_bytes() + plan.chunks[0].slot_bytes());
    }
  }
}

// The plan's bytes are what the model allocates: the tracker's activations after reserve (the scratch) and after
// making one micro-batch's activations (its slot), for every policy, with and without the head, TP 1.
TEST(ActivationPlan, CountsExactlyWhatTheModelAllocates) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.num_hidden_layers = 4;
  std::vector<RecomputePolicy> policies = {{},
                                           {.full = true, .num_layers = 2},
                                           {.full = true, .num_layers = 3},
                                           {.full = true, .method = RecomputeMethod::block, .num_layers = 1}};
  for (const SelectiveRecompute& modules : selective_policies()) policies.push_back({.selective = modules});
  for (DType dtype : {DType::f32, DType::bf16})
    for (const RecomputePolicy& policy : policies) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), describe(policy)));
      MemoryTracker tracker;
      testing::ModelUnderTest m(config, dtype, testing::fast_kernels(), 24, policy, &tracker);
      const ActivationPlan plan =
          plan_activations(config, {m.model.span()}, m.model.activation_shape(), m.model.recompute_policy());
      ASSERT_EQ(plan.chunks.size(), 1u);
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::activations), plan.scratch_bytes());
      CausalLm::Activations layers = m.model.make_layer_activations();
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::activations),
                plan.scratch_bytes() + plan.chunks[0].layers_bytes());
      CausalLm::Activations head = m.model.make_head_activations();
      EXPECT_EQ(tracker.current(MemoryTier::device, MemoryCategory::activations),
                plan.scratch_bytes() + plan.chunks[0].slot_bytes());
      EXPECT_EQ(int64_t(plan.chunks[0].layers.size()), config.num_hidden_layers);
    }
}

TEST(ActivationPlan, TableNamesWhatEachLayerKeepsAndRecomputes) {
  ModelConfig config = testing::micro_config(Arch::llama, false);
  config.num_hidden_layers = 3;
  const ActivationShape shape{.max_tokens = 16, .vocab_columns = config.vocab_size, .dtype = DType::f32};
  const std::string block =
      plan_activations(config, {ModelSpan::whole(config)}, shape,
                       {.full = true, .method = RecomputeMethod::block, .num_layers = 2})
          .table(0, "one micro-batch");
  EXPECT_NE(block.find("layers 0-1"), std::string::npos) << block;
  EXPECT_NE(block.find("recomputed, its group starts here; keeps input"), std::string::npos) << block;
  EXPECT_NE(block.find("layer 2 "), std::string::npos) << block;
  const std::string selective =
      plan_activations(config, {ModelSpan::whole(config)}, shape, {.selective = {.core_attn = true}})
          .table(0, "one micro-batch");
  EXPECT_NE(selective.find("recomputes attention output, attention lse"), std::string::npos) << selective;
  EXPECT_NE(selective.find("once: the discarded tensors"), std::string::npos) << selective;
}

// Offload of the first 1, 3 and 4 (all but the last) of 5 layers: the same bits; both micro-batches' offloaded
// layers on the host, and the device peak below saving everything by all but two offloaded layers' worth.
TEST(ActivationOffload, GivesTheSameBitsWithTheLayersOnTheHostTier) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.num_hidden_layers = 5;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const InFlightRun plain = run_two_in_flight(config, dtype, {});
    EXPECT_EQ(plain.host_peak, 0);
    for (int64_t offloaded : {1, 3, 4}) {
      SCOPED_TRACE(fmt::format("{} {} layers offloaded", dtype_name(dtype), offloaded));
      const InFlightRun run = run_two_in_flight(config, dtype, {}, testing::fast_kernels(), offloaded);
      for (size_t b = 0; b < plain.logp.size(); ++b)
        rf::testing::expect_close(run.logp[b], plain.logp[b], 0.0, 0.0, "log-probs");
      rf::testing::expect_close(run.grads, plain.grads, 0.0, 0.0, "gradients");
      const ActivationShape shape{.max_tokens = 16, .vocab_columns = config.vocab_size, .dtype = dtype};
      const ActivationPlan plan = plan_activations(config, {ModelSpan::whole(config)}, shape, {}, offloaded);
      const int64_t layer = plan.chunks[0].layers[0].bytes;
      // Two micro-batches' offloaded layers wait on the host at once (both forwards ran before either backward).
      EXPECT_EQ(run.host_peak, 2 * offloaded * layer);
      EXPECT_EQ(run.device_peak, plain.device_peak - 2 * offloaded * layer + std::min<int64_t>(2, offloaded) * layer);
      EXPECT_EQ(plan.scratch_bytes(), std::min<int64_t>(2, offloaded) * layer);
      EXPECT_EQ(plan.chunks[0].offloaded_bytes(), offloaded * layer);
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
