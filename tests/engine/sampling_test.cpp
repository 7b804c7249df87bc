// engine/sampling.h: the kept set and probabilities of temperature / top-k / top-p against values
// worked out by hand, the draw against its distribution over an even grid of uniforms, greedy
// decoding as the temperature-0 case, and decodes that depend only on (seed, request, sample).
#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/element_access.h"
#include "model/param_init.h"

namespace rf::engine {
namespace {

// Logits whose softmax is `probs`.
Tensor logits_of(const std::vector<double>& probs) {
  Tensor t({int64_t(probs.size())}, DType::f32);
  for (size_t i = 0; i < probs.size(); ++i) store_f64(t, int64_t(i), std::log(probs[i]) + 3.0);
  return t;
}

void expect_distribution(const std::vector<double>& got, const std::vector<double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << "token " << i;
}

TEST(Sampling, TemperatureTopKAndTopPKeepWhatTheyShould) {
  const Tensor logits = logits_of({0.1, 0.4, 0.2, 0.3});
  expect_distribution(sampling_distribution(logits, 4, {.temperature = 1.0}), {0.1, 0.4, 0.2, 0.3});
  // T = 0.5 squares the probabilities before renormalising: 0.01 0.16 0.04 0.09 over 0.30.
  expect_distribution(sampling_distribution(logits, 4, {.temperature = 0.5}), {0.01 / 0.3, 0.16 / 0.3, 0.04 / 0.3, 0.09 / 0.3});
  expect_distribution(sampling_distribution(logits, 4, {.top_k = 2}), {0, 0.4 / 0.7, 0, 0.3 / 0.7});
  // top_p 0.65: 0.4 + 0.3 = 0.7 is the smallest prefix reaching it.
  expect_distribution(sampling_distribution(logits, 4, {.top_p = 0.65}), {0, 0.4 / 0.7, 0, 0.3 / 0.7});
  expect_distribution(sampling_distribution(logits, 4, {.top_p = 0.3}), {0, 1, 0, 0});
  // top-k first, then top-p over the renormalised top-k: 0.4/0.7 = 0.571 < 0.6 needs both.
  expect_distribution(sampling_distribution(logits, 4, {.top_k = 2, .top_p = 0.6}), {0, 0.4 / 0.7, 0, 0.3 / 0.7});
  expect_distribution(sampling_distribution(logits, 4, {.temperature = 0}), {0, 1, 0, 0});
  // Candidates beyond num_candidates are never kept.
  expect_distribution(sampling_distribution(logits, 3, {}), {0.1 / 0.7, 0.4 / 0.7, 0.2 / 0.7, 0});
}

TEST(Sampling, TiesKeepTheLowerIdAndGreedyTakesTheFirstMaximum) {
  const Tensor logits = logits_of({0.3, 0.2, 0.3, 0.2});
  EXPECT_EQ(sample_token(logits, 4, {.temperature = 0}, 0.99), 0);
  expect_distribution(sampling_distribution(logits, 4, {.top_k = 1}), {1, 0, 0, 0});
  expect_distribution(sampling_distribution(logits, 4, {.top_k = 3}), {0.375, 0.25, 0.375, 0});
}

TEST(Sampling, DrawsFollowTheDistribution) {
  const Tensor logits = logits_of({0.05, 0.25, 0.1, 0.35, 0.15, 0.1});
  for (const SamplingParams& p : {SamplingParams{}, SamplingParams{.temperature = 0.7, .top_k = 4},
                                  SamplingParams{.temperature = 1.3, .top_p = 0.8}}) {
    const std::vector<double> dist = sampling_distribution(logits, 6, p);
    constexpr int kDraws = 10000;
    std::vector<double> counts(6, 0.0);
    for (int i = 0; i < kDraws; ++i) counts[size_t(sample_token(logits, 6, p, (i + 0.5) / kDraws))] += 1.0 / kDraws;
    // An even grid of uniforms through the inverse CDF: each frequency within one grid step.
    for (size_t v = 0; v < 6; ++v) EXPECT_NEAR(counts[v], dist[v], 1.0 / kDraws + 1e-12) << "token " << v;
  }
}

TEST(Sampling, BadParamsNameTheField) {
  const auto message = [](const SamplingParams& p) {
    try {
      p.validate();
    } catch (const ConfigError& e) {
      return e.key_path();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.temperature = -1}), "temperature");
  EXPECT_EQ(message({.temperature = NAN}), "temperature");
  EXPECT_EQ(message({.top_p = 0}), "top_p");
  EXPECT_EQ(message({.top_p = 1.5}), "top_p");
  EXPECT_EQ(message({.temperature = 0, .top_k = -1, .top_p = 1}), "no error");
}

class SampleDecode : public ::testing::Test {
 protected:
  SampleDecode()
      : kernels_(kernels::KernelConfig{.optimization_level = 0}),
        parallel_(dist::ParallelContext::single_process()),
        config_(make_config()),
        params_(model::ParamLayout::for_model(config_), DType::f32),
        model_(config_, params_, nullptr, kernels_, parallel_) {
    model::init_params(params_, config_, 3);
    model_.reserve(256);
  }
  static model::ModelConfig make_config() {
    model::ModelConfig c;
    c.arch = model::Arch::qwen2;
    c.vocab_size = 30;
    c.hidden_size = 16;
    c.intermediate_size = 24;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 4;
    c.attention_bias = true;
    c.initializer_range = 0.5;  // peaked enough that greedy and sampled runs differ
    return c;
  }
  std::vector<SampleRequest> requests() const {
    return {{{1, 2, 3}, 0, 0}, {{4, 5}, 1, 0}, {{4, 5}, 1, 1}, {{7, 8, 9, 10}, 2, 0}};
  }

  kernels::KernelRegistry kernels_;
  dist::ParallelContext parallel_;
  model::ModelConfig config_;
  model::ParamStore params_;
  model::CausalLm model_;
};

// Temperature 0 against an argmax computed here, one sequence and one forward at a time, over the
// allowed candidates (first maximum on ties, as torch.argmax), stopping after the eos id.
TEST_F(SampleDecode, TemperatureZeroIsGreedyDecoding) {
  const auto reqs = requests();
  const std::vector<int64_t> eos = {29};
  constexpr int64_t kCandidates = 30, kMaxNew = 12;
  const auto sampled = sample_decode(model_, reqs, kMaxNew, eos, kCandidates, {.temperature = 0});
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int64_t> sequence = reqs[i].prompt, expected;
    while (int64_t(expected.size()) < kMaxNew && (expected.empty() || expected.back() != eos[0])) {
      const model::PackedSequences packed = model::pack_sequences({sequence});
      const model::ModelOutputs out = model_.forward(packed.inputs(), model::EntropyOutput::skip);
      const TensorView last = out.logits_NV.select(0, int64_t(sequence.size()) - 1);
      int64_t best = 0;
      for (int64_t v = 1; v < kCandidates; ++v)
        if (load_f64(last, v * last.stride(0)) > load_f64(last, best * last.stride(0))) best = v;
      sequence.push_back(best);
      expected.push_back(best);
    }
    EXPECT_EQ(sampled[i].ids, expected) << "request " << i;
  }
}

TEST_F(SampleDecode, DrawsDependOnlyOnSeedRequestAndSample) {
  const auto reqs = requests();
  const SamplingParams p{.temperature = 1.0, .seed = 11};
  const auto together = sample_decode(model_, reqs, 10, {}, 30, p);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto alone = sample_decode(model_, {reqs[i]}, 10, {}, 30, p);
    EXPECT_EQ(alone[0].ids, together[i].ids) << "request " << i << " depends on its batch";
    EXPECT_EQ(together[i].ids.size(), 10u);
    EXPECT_EQ(together[i].finish_reason, FinishReason::length);
  }
  EXPECT_NE(together[1].ids, together[2].ids) << "two samples of one prompt should differ";
  EXPECT_NE(sample_decode(model_, reqs, 10, {}, 30, {.temperature = 1.0, .seed = 12})[0].ids, together[0].ids);
  // Ids at or above num_candidates are never drawn.
  for (const auto& s : sample_decode(model_, reqs, 10, {}, 5, p))
    for (int64_t id : s.ids) EXPECT_LT(id, 5);
}

TEST_F(SampleDecode, StopsAtAnEosIdAndKeepsIt) {
  const auto reqs = requests();
  const auto free_run = sample_decode(model_, reqs, 10, {}, 30, {.seed = 5});
  const int64_t eos = free_run[0].ids[3];  // make request 0's fourth token an eos
  const std::vector<int64_t> eos_ids = {eos};
  const auto stopped = sample_decode(model_, reqs, 10, eos_ids, 30, {.seed = 5});
  const auto first = std::find(free_run[0].ids.begin(), free_run[0].ids.end(), eos);
  EXPECT_EQ(stopped[0].ids, std::vector<int64_t>(free_run[0].ids.begin(), first + 1));
  EXPECT_EQ(stopped[0].finish_reason, FinishReason::stop);
}

}  // namespace
}  // namespace rf::engine
