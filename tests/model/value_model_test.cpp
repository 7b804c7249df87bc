// Value and score models (model/value_head.h): every coordinate of every parameter against finite
// differences of the f64 `ref` forward through the values; f32 fast kernels against that f64 oracle; the
// head as the LM's final norm and projection (a score row copied from lm_head gives that vocabulary
// column's logits); the backbone of an LM folder under a fresh head (load_hf_backbone); and the errors
// for what a value model does not have.
// Legend: N tokens.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/element_access.h"
#include "model/hf_folder.h"
#include "model/hf_weights.h"
#include "model/param_init.h"
#include "model_fixture.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using testing::fast_kernels;
using testing::ModelUnderTest;
using testing::randomize_weights;
using testing::ref_kernels;
using rf::testing::max_abs;

// L = sum_n a_n values_n.
double weighted_values(const ModelOutputs& out, TensorView a_N) {
  double loss = 0;
  for (int64_t n = 0; n < out.values_N.numel(); ++n) loss += load_f64(a_N, n) * load_f64(out.values_N, n);
  return loss;
}

struct ValueCase {
  Arch arch;
  bool tied;
  HeadKind head;
};

class ValueModelGradients : public ::testing::TestWithParam<ValueCase> {};

TEST_P(ValueModelGradients, EveryCoordinateMatchesFiniteDifferences) {
  const ValueCase c = GetParam();
  const ModelConfig config = testing::micro_config(c.arch, c.tied, c.head);
  const PackedSequences packed = testing::fd_documents();
  ModelUnderTest m(config, DType::f64, ref_kernels(), packed.tokens_N.numel());
  EXPECT_EQ(m.params.layout().contains("score.bias"), c.head == HeadKind::value);
  EXPECT_FALSE(m.params.layout().contains("lm_head.weight"));
  randomize_weights(m.params, 78);
  const Tensor a_N = rf::testing::random_tensor({packed.tokens_N.numel()}, DType::f64, 6);

  m.grads.zero();
  const ModelOutputs out = m.model.forward(packed.inputs());
  EXPECT_TRUE(out.logp_N.empty() && out.entropy_N.empty() && out.logits_NV.empty());
  m.model.backward({.dvalues_N = a_N});
  auto loss = [&] { return weighted_values(m.model.forward(packed.inputs()), a_N); };
  for (const auto& e : m.params.layout().entries())
    rf::testing::expect_gradient_matches_fd(loss, m.params.get(e.name), m.grads.get(e.name), e.name);
}

INSTANTIATE_TEST_SUITE_P(Heads, ValueModelGradients,
                         ::testing::Values(ValueCase{Arch::llama, true, HeadKind::value},
                                           ValueCase{Arch::qwen2, false, HeadKind::value},
                                           ValueCase{Arch::qwen3, false, HeadKind::score}),
                         [](const auto& info) {
                           return arch_name(info.param.arch) + (info.param.tied ? "_tied_" : "_untied_") +
                                  head_name(info.param.head);
                         });

// Values and gradients of `dtype` weights converted from `source`, in f64.
struct ValueRun {
  Tensor values_N;
  std::vector<Tensor> grads;
};
ValueRun run_values(const ModelConfig& config, const ParamStore& source, DType dtype, const kernels::KernelRegistry& k,
                    const PackedSequences& packed, TensorView a_N) {
  ModelUnderTest m(config, dtype, k, packed.tokens_N.numel());
  copy_convert(source.flat(), m.params.flat());
  const Tensor a_stat = clone(a_N, stat_dtype_for(dtype));
  m.grads.zero();
  ValueRun r{clone(m.model.forward(packed.inputs()).values_N, DType::f64), {}};
  m.model.backward({.dvalues_N = a_stat});
  r.grads = testing::grads_f64(m);
  return r;
}

TEST(ValueModel, F32MatchesTheF64OracleAndBf16StaysClose) {
  for (HeadKind head : {HeadKind::value, HeadKind::score}) {
    SCOPED_TRACE(head_name(head));
    const ModelConfig config = testing::micro_config(Arch::qwen2, false, head);
    const ParamStore weights(ParamLayout::for_model(config), DType::f64);
    randomize_weights(weights, 31);
    const PackedSequences packed = testing::oracle_documents();
    const Tensor a_N = rf::testing::random_tensor({packed.tokens_N.numel()}, DType::f64, 12);
    const ValueRun oracle = run_values(config, weights, DType::f64, ref_kernels(), packed, a_N);
    const ValueRun f32 = run_values(config, weights, DType::f32, fast_kernels(), packed, a_N);
    const ValueRun bf16 = run_values(config, weights, DType::bf16, fast_kernels(), packed, a_N);
    const double scale = max_abs(oracle.values_N);
    ASSERT_GT(scale, 0.1);
    rf::testing::expect_close(f32.values_N, oracle.values_N, 1e-5, 1e-5 * scale, "f32 values");
    rf::testing::expect_close(bf16.values_N, oracle.values_N, 0.0, 0.05 * scale, "bf16 values");
    const ParamLayout layout = ParamLayout::for_model(config);
    const auto& entries = layout.entries();
    for (size_t t = 0; t < entries.size(); ++t) {
      rf::testing::expect_close(f32.grads[t], oracle.grads[t], 1e-4, 1e-5 * max_abs(oracle.grads[t]),
                                "f32 grad " + entries[t].name);
    }
  }
}

// The value head is the LM head's final norm and projection: with score.weight set to lm_head's row k
// and a zero bias, a value model on the LM's weights returns the LM's logits of token k.
TEST(ValueModel, AScoreRowFromLmHeadGivesThatColumnOfTheLogits) {
  const ModelConfig lm_config = testing::micro_config(Arch::qwen3, false);
  const ModelConfig config = testing::micro_config(Arch::qwen3, false, HeadKind::value);
  const PackedSequences packed = testing::fd_documents();
  const int64_t N = packed.tokens_N.numel(), k = 13;
  ModelUnderTest lm(lm_config, DType::f64, ref_kernels(), N), critic(config, DType::f64, ref_kernels(), N);
  randomize_weights(lm.params, 5);
  for (const ParamEntry& e : lm.params.layout().entries())
    if (critic.params.layout().contains(e.name)) copy_convert(lm.params.get(e.name), critic.params.get(e.name));
  copy_convert(lm.params.get("lm_head.weight").slice(0, k, 1), critic.params.get("score.weight"));
  fill_zero(critic.params.get("score.bias"));
  const ModelOutputs lm_out = lm.model.forward(packed.inputs());
  const ModelOutputs values = critic.model.forward(packed.inputs());
  for (int64_t n = 0; n < N; ++n)
    EXPECT_NEAR(load_f64(values.values_N, n), load_f64(lm_out.logits_NV, n * lm_out.logits_NV.stride(0) + k), 1e-12)
        << "token " << n;
}

// verl's critic from the actor's folder: the backbone as stored, lm_head ignored, and the head as
// init_params draws it for the seed (N(0, initializer_range) weight, zero bias).
TEST(ValueModel, LoadsAnLmFoldersBackboneUnderAFreshHead) {
  const std::string dir = ::testing::TempDir() + "rf_value_backbone_test";
  std::filesystem::remove_all(dir);
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const ModelConfig lm_config = testing::micro_config(Arch::llama, tied);
    const ParamStore lm(ParamLayout::for_model(lm_config), DType::f32);
    randomize_weights(lm, 9);
    write_hf_folder(dir, HfModelFolder::for_config(lm_config, DType::f32), lm);

    const ModelConfig config = testing::micro_config(Arch::llama, tied, HeadKind::value);
    const ParamStore critic(ParamLayout::for_model(config), DType::f32);
    load_hf_backbone(critic, config, dir, 21);
    const ParamStore drawn(ParamLayout::for_model(config), DType::f32);
    init_params(drawn, config, 21);
    for (const ParamEntry& e : critic.layout().entries()) {
      const bool head = e.name.starts_with("score.");
      const TensorView expected = head ? drawn.get(e.name) : lm.get(e.name);
      EXPECT_EQ(rf::testing::max_abs_diff(critic.get(e.name), expected), 0.0) << e.name;
    }
    EXPECT_EQ(max_abs(critic.get("score.bias")), 0.0);
    EXPECT_GT(max_abs(critic.get("score.weight")), 0.0);
    // The folder itself is an LM: loading it as a value model without the backbone option names the gap.
    rf::testing::expect_error_containing([&] { load_hf_weights(critic, dir); },
                                         "weights are missing tensor 'score.weight'");
    std::filesystem::remove_all(dir);
  }
}

TEST(ValueModel, RejectsWhatAValueModelDoesNotHave) {
  const ModelConfig config = testing::micro_config(Arch::llama, false, HeadKind::value);
  ModelUnderTest m(config, DType::f64, ref_kernels(), 8);
  init_params(m.params, config, 4);
  const PackedSequences packed = pack_sequences({{1, 2, 3, 4}});
  ModelInputs no_targets = packed.inputs();
  no_targets.targets_N = TensorView();
  const Tensor values_with = clone(m.model.forward(packed.inputs()).values_N, DType::f64);
  rf::testing::expect_close(m.model.forward(no_targets).values_N, values_with, 0, 0, "values without targets");
  const Tensor d_N({4}, DType::f64);
  rf::testing::expect_error_containing([&] { m.model.backward({.dlogp_N = d_N}); }, "has no LM head");
  rf::testing::expect_error_containing([&] { m.model.backward({}); }, "dvalues_N");
  rf::testing::expect_error_containing([&] { m.model.vocab_logits(0); }, "has no LM head");
  rf::testing::expect_error_containing([&] { m.model.reserve_paged(4, 1); }, "LM head");

  ModelConfig two_labels = testing::micro_config(Arch::llama, false, HeadKind::score);
  two_labels.num_labels = 2;
  try {
    ModelUnderTest wide(two_labels, DType::f64, ref_kernels(), 8);
    ADD_FAILURE() << "a two-label head should be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "id2label");
    EXPECT_NE(std::string(e.what()).find("one value per token"), std::string::npos) << e.what();
  }
  // An LM refuses a value gradient.
  ModelUnderTest lm(testing::micro_config(Arch::llama, false), DType::f64, ref_kernels(), 8);
  lm.model.forward(packed.inputs());
  rf::testing::expect_error_containing([&] { lm.model.backward({.dlogp_N = d_N, .dvalues_N = d_N}); },
                                       "has no value head");
}

}  // namespace
}  // namespace rf::model
