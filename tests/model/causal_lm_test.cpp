// CausalLm beyond the oracle files: fast kernels against the f64 oracle (f32 tightly, bf16
// loosely), packing, batching, gradient accumulation, weight loading errors and bad inputs.
#include "model/causal_lm.h"

#include <gtest/gtest.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/hf_weights.h"
#include "model/param_init.h"
#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using testing::fast_kernels;
using testing::ModelUnderTest;
using testing::ref_kernels;
using rf::testing::max_abs;

// Runs forward + backward of `dtype` weights converted from `source`, returning the gradients in f64.
struct RunResult {
  Tensor logp_N, entropy_N;
  std::vector<Tensor> grads;
};
RunResult run(const ModelConfig& config, const ParamStore& source, DType dtype, const kernels::KernelRegistry& k,
              const PackedSequences& packed, uint64_t loss_seed) {
  ModelUnderTest m(config, dtype, k, packed.tokens_N.numel());
  copy_convert(source.flat(), m.params.flat());
  const auto w = testing::random_loss_weights(packed, stat_dtype_for(dtype), loss_seed);
  m.grads.zero();
  const ModelOutputs out = m.model.forward(packed.inputs(0.9));
  RunResult r{clone(out.logp_N, DType::f64), clone(out.entropy_N, DType::f64), {}};
  m.model.backward({w.a_N, w.b_N});
  r.grads = testing::grads_f64(m);
  return r;
}

class FastModel : public ::testing::TestWithParam<Arch> {};

TEST_P(FastModel, F32MatchesTheF64OracleAndBf16StaysClose) {
  const ModelConfig config = testing::micro_config(GetParam(), false);
  const ParamStore weights(ParamLayout::for_model(config), DType::f64);
  init_params(weights, config, 3);
  const PackedSequences packed = testing::oracle_documents();
  const RunResult oracle = run(config, weights, DType::f64, ref_kernels(), packed, 9);
  const RunResult f32 = run(config, weights, DType::f32, fast_kernels(), packed, 9);
  const RunResult bf16 = run(config, weights, DType::bf16, fast_kernels(), packed, 9);
  // The RL trainer's deterministic mode: the forward in the rollout's order (paged_order_attention.h).
  const kernels::KernelRegistry batch_invariant(kernels::KernelConfig{.batch_invariant = true});
  const RunResult f32_invariant = run(config, weights, DType::f32, batch_invariant, packed, 9);
  rf::testing::expect_close(f32.logp_N, oracle.logp_N, 1e-5, 1e-5, "f32 logp");
  rf::testing::expect_close(f32_invariant.logp_N, oracle.logp_N, 1e-5, 1e-5, "f32 batch-invariant logp");
  rf::testing::expect_close(f32.entropy_N, oracle.entropy_N, 1e-5, 1e-5, "f32 entropy");
  rf::testing::expect_close(bf16.logp_N, oracle.logp_N, 0.0, 0.05, "bf16 logp");
  const ParamLayout layout = ParamLayout::for_model(config);
  const auto& entries = layout.entries();
  for (size_t t = 0; t < entries.size(); ++t) {
    const double scale = max_abs(oracle.grads[t]);
    rf::testing::expect_close(f32.grads[t], oracle.grads[t], 1e-4, 1e-5 * scale, "f32 grad " + entries[t].name);
    rf::testing::expect_close(f32_invariant.grads[t], oracle.grads[t], 1e-4, 1e-5 * scale,
                              "f32 batch-invariant grad " + entries[t].name);
    // bf16: the fused attention rounds the probabilities P and dS to bf16 before their products, as
    // Hugging Face's eager bf16 attention and flash-attention do; through two layers of this micro
    // model that leaves per-tensor gradient errors of up to ~12% of the tensor's largest entry
    // (under 10% when the attention runs on `ref`, which rounds only its outputs).
    rf::testing::expect_close(bf16.grads[t], oracle.grads[t], 0.0, 0.15 * scale + 1e-6, "bf16 grad " + entries[t].name);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, FastModel, ::testing::Values(Arch::llama, Arch::qwen2, Arch::qwen3),
                         [](const auto& info) { return arch_name(info.param); });

TEST(CausalLm, PackedDocumentsEqualSeparateRunsAndRowsEqualPacking) {
  const ModelConfig config = testing::micro_config(Arch::qwen3, true);
  ModelUnderTest m(config, DType::f64, ref_kernels(), 16);
  init_params(m.params, config, 5);
  const std::vector<std::vector<int64_t>> docs = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16}};
  const PackedSequences packed = pack_sequences(docs);
  const Tensor packed_logp = clone(m.model.forward(packed.inputs()).logp_N, DType::f64);
  for (size_t d = 0; d < docs.size(); ++d) {
    const PackedSequences single = pack_sequences({docs[d]});
    const ModelOutputs out = m.model.forward(single.inputs());
    for (int64_t t = 0; t < 8; ++t)
      EXPECT_NEAR(out.logp_N.data<double>()[t], packed_logp.data<double>()[int64_t(d) * 8 + t], 1e-13);
  }
  // The same two documents as a B=2 x T=8 batch without cu_seqlens.
  ModelInputs rows = packed.inputs();
  rows.batch = 2;
  rows.seq_len = 8;
  rows.cu_seqlens = {};
  const ModelOutputs out = m.model.forward(rows);
  for (int64_t n = 0; n < 16; ++n) EXPECT_NEAR(out.logp_N.data<double>()[n], packed_logp.data<double>()[n], 1e-13);
}

// A model without gradients (the reference, a reward model, decoding) runs its forwards on one layer's activations,
// written by every layer in turn: the same outputs, bit for bit, as a model keeping every layer's for a backward, in
// about one layer's memory instead of all of them.
TEST(CausalLm, ForwardOnlyPassesKeepOneLayersActivations) {
  ModelConfig config = testing::micro_config(Arch::qwen3, false);
  config.num_hidden_layers = 6;
  ModelUnderTest trainable(config, DType::f32, fast_kernels(), 32);
  init_params(trainable.params, config, 7);
  MemoryTracker tracker;
  dist::ParallelContext alone = dist::ParallelContext::single_process();
  CausalLm frozen(config, trainable.params, nullptr, fast_kernels(), alone, &tracker);
  frozen.reserve(32);
  const PackedSequences packed = pack_sequences({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}});
  const Tensor kept = clone(trainable.model.forward(packed.inputs()).logp_N, DType::f32);
  const Tensor lean = clone(frozen.forward(packed.inputs()).logp_N, DType::f32);
  ASSERT_EQ(kept.numel(), lean.numel());
  EXPECT_EQ(std::memcmp(kept.view().raw(), lean.view().raw(), size_t(kept.numel()) * sizeof(float)), 0);
  // Every layer's saved tensors, against one layer's and two residual buffers (the head's alike in both).
  MemoryTracker full_tracker;
  CausalLm keeping(config, trainable.params, &trainable.grads, fast_kernels(), alone, &full_tracker);
  keeping.reserve(32);
  const int64_t full = keeping.make_activations().bytes(), head = keeping.make_head_activations().bytes();
  const int64_t one_layer = (full - head) / (config.num_hidden_layers + 1);
  EXPECT_LT(tracker.current(MemoryTier::device, MemoryCategory::activations), head + 3 * one_layer);
  EXPECT_THROW(frozen.backward({}, kernels::Accumulate::overwrite), Error);
}

// config.json's rope_scaling reaches the attention kernels: with linear scaling by 2, a model at
// positions 2p computes exactly what the unscaled model computes at positions p (the angles are
// (2p) (f / 2) = p f), and differs from the unscaled model at the same positions. Both kernel sets.
TEST(CausalLm, LinearRopeScalingHalvesTheAngles) {
  ModelConfig plain = testing::micro_config(Arch::llama, false);
  ModelConfig scaled = plain;
  scaled.rope_scaling = {.type = kernels::RopeScalingType::linear, .factor = 2.0};
  for (const kernels::KernelRegistry* kernels : {&ref_kernels(), &fast_kernels()}) {
    const DType dtype = kernels == &ref_kernels() ? DType::f64 : DType::f32;
    ModelUnderTest a(scaled, dtype, *kernels, 16), b(plain, dtype, *kernels, 16);
    init_params(a.params, scaled, 7);
    init_params(b.params, plain, 7);
    const PackedSequences packed = pack_sequences({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {11, 12, 13, 14, 15, 16}});
    const Tensor doubled = clone(packed.positions_N, DType::i64);
    for (int64_t n = 0; n < doubled.numel(); ++n) doubled.data<int64_t>()[n] *= 2;
    ModelInputs scaled_inputs = packed.inputs();
    scaled_inputs.positions_N = doubled;
    const Tensor logp_scaled = clone(a.model.forward(scaled_inputs).logp_N, DType::f64);
    const Tensor logp_plain = clone(b.model.forward(packed.inputs()).logp_N, DType::f64);
    rf::testing::expect_close(logp_scaled, logp_plain, 0, 0, "scaled at 2p vs plain at p");
    const Tensor logp_scaled_same = clone(a.model.forward(packed.inputs()).logp_N, DType::f64);
    EXPECT_GT(rf::testing::max_abs_diff(logp_scaled_same, logp_plain), 1e-6);
  }
}

TEST(CausalLm, GradientsAccumulateOverMicroBatches) {
  const ModelConfig config = testing::micro_config(Arch::llama, false);
  ModelUnderTest m(config, DType::f64, ref_kernels(), 8);
  init_params(m.params, config, 6);
  const PackedSequences packed = pack_sequences({{1, 2, 3, 4, 5}, {6, 7, 8}});
  const auto w = testing::random_loss_weights(packed, DType::f64, 2);
  m.grads.zero();
  m.model.forward(packed.inputs());
  m.model.backward({w.a_N, w.b_N});
  const Tensor once = clone(m.grads.flat(), DType::f64);
  m.model.forward(packed.inputs());
  m.model.backward({w.a_N, w.b_N});
  const Tensor twice_expected = clone(once, DType::f64);
  for (int64_t i = 0; i < twice_expected.numel(); ++i) twice_expected.data<double>()[i] *= 2;
  rf::testing::expect_close(m.grads.flat(), twice_expected, 1e-14, 0.0, "accumulated gradient");
  EXPECT_GT(max_abs(once), 0.0);
}

// Overwriting the linear weights' gradients (the first backward after zeroing) gives exactly what
// adding onto zeros gives, for every parameter: also for the norms and the tied embedding, whose
// gradients keep adding.
TEST(CausalLm, OverwritingLinearWeightGradsEqualsAddingOntoZeros) {
  for (bool tied : {false, true}) {
    const ModelConfig config = testing::micro_config(Arch::qwen2, tied);
    ModelUnderTest m(config, DType::f64, ref_kernels(), 8);
    init_params(m.params, config, 7);
    const PackedSequences packed = pack_sequences({{1, 2, 3, 4, 5}, {6, 7, 8}});
    const auto w = testing::random_loss_weights(packed, DType::f64, 3);
    m.grads.zero();
    m.model.forward(packed.inputs());
    m.model.backward({w.a_N, w.b_N}, kernels::Accumulate::add);
    const Tensor added = clone(m.grads.flat(), DType::f64);
    m.grads.zero();
    m.model.forward(packed.inputs());
    m.model.backward({w.a_N, w.b_N}, kernels::Accumulate::overwrite);
    rf::testing::expect_close(m.grads.flat(), added, 0.0, 0.0, tied ? "tied" : "untied");
    EXPECT_GT(max_abs(added), 0.0);
  }
}

TEST(CausalLm, RejectsBadInputsWithClearErrors) {
  const ModelConfig config = testing::micro_config(Arch::llama, true);
  ModelUnderTest m(config, DType::f64, ref_kernels(), 6);
  auto expect_error = [&](const ModelInputs& in, const std::string& fragment) {
    try {
      m.model.forward(in);
      ADD_FAILURE() << "expected an error containing '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  PackedSequences p = pack_sequences({{1, 2, 3}});
  p.tokens_N.data<int64_t>()[1] = 24;  // vocab is 24
  expect_error(p.inputs(), "tokens_N[1] = 24 is outside [0, 24)");
  p = pack_sequences({{1, 2, 3}});
  p.targets_N.data<int64_t>()[0] = -3;
  expect_error(p.inputs(), "targets_N[0] = -3");
  expect_error(pack_sequences({{1, 2, 3, 4, 5, 6, 7}}).inputs(), "7 tokens exceed the 6 reserved");
  p = pack_sequences({{1, 2, 3}});
  ModelInputs bad_shape = p.inputs();
  bad_shape.seq_len = 2;
  expect_error(bad_shape, "tokens_N: expected 2 tokens");
  expect_error(pack_sequences({{1, 2, 3}}).inputs(0.0), "temperature must be positive");

  ModelUnderTest fresh(config, DType::f64, ref_kernels(), 4);
  const Tensor dlogp({3}, DType::f64);
  EXPECT_THROW(fresh.model.backward({dlogp}), Error);  // no forward yet
  fresh.model.forward(pack_sequences({{1, 2, 3}}).inputs());
  const Tensor wrong_dtype({3}, DType::f32);
  EXPECT_THROW(fresh.model.backward({wrong_dtype}), Error);
}

// Writes a safetensors file of f32 tensors (test-only writer; the real one belongs to the HF layer).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, view] : tensors) {
    const Tensor f32 = clone(view, DType::f32);
    header[name] = {{"dtype", "F32"},
                    {"shape", std::vector<int64_t>(view.shape().begin(), view.shape().end())},
                    {"data_offsets", {data.size(), data.size() + f32.nbytes()}}};
    data.append(static_cast<const char*>(f32.view().raw()), f32.nbytes());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t size = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&size), 8);
  out.write(text.data(), std::streamsize(text.size()));
  out.write(data.data(), std::streamsize(data.size()));
}

TEST(HfWeights, LoadsWhatItWroteAndNamesWhatIsWrong) {
  const ModelConfig config = testing::micro_config(Arch::qwen2, false);
  const ParamStore source(ParamLayout::for_model(config), DType::f32);
  init_params(source, config, 8);
  const std::string dir = ::testing::TempDir() + "rf_hf_weights_test";
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, TensorView>> all;
  for (const auto& e : source.layout().entries()) all.emplace_back(e.name, source.get(e.name));

  write_safetensors(dir + "/model.safetensors", all);
  const ParamStore loaded(ParamLayout::for_model(config), DType::f32);
  load_hf_weights(loaded, dir);
  EXPECT_EQ(rf::testing::max_abs_diff(loaded.flat(), source.flat()), 0.0);

  auto expect_io_error = [&](const std::vector<std::pair<std::string, TensorView>>& tensors, const std::string& fragment) {
    write_safetensors(dir + "/model.safetensors", tensors);
    try {
      load_hf_weights(loaded, dir);
      ADD_FAILURE() << "expected an IoError containing '" << fragment << "'";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto missing = all;
  missing.pop_back();
  expect_io_error(missing, "weights are missing tensor 'lm_head.weight'");
  auto extra = all;
  extra.emplace_back("model.layers.9.mlp.up_proj.weight", source.get("model.norm.weight"));
  expect_io_error(extra, "'model.layers.9.mlp.up_proj.weight' is not a parameter of this model config");
  auto reshaped = all;
  ASSERT_EQ(reshaped[2].first, "model.layers.0.self_attn.q_proj.weight");
  reshaped[2].second = source.get("model.layers.0.self_attn.k_proj.weight");
  expect_io_error(reshaped, "'model.layers.0.self_attn.q_proj.weight' has shape [8, 16], the config implies [16, 16]");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rf::model
