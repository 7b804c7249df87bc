// engine/sampling.h: the kept set and probabilities of temperature / top-k / top-p against values
// worked out by hand, the draw against its distribution over an even grid of uniforms, greedy
// decoding as the temperature-0 case, and decodes that depend only on (seed, request, sample).
#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/element_access.h"
#include "core/philox.h"
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

// The sampler as first written, one comparison sort over every candidate and one exp pass each for
// the draw and the log-prob: the fast path (radix order, shared exps) must give its bits exactly.
struct SortingReference {
  static std::vector<double> z_of(TensorView logits_V, int64_t n, double temperature) {
    std::vector<double> z(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) z[size_t(v)] = load_f64(logits_V, v * logits_V.stride(0)) / temperature;
    return z;
  }
  static int64_t sample(TensorView logits_V, int64_t n, const SamplingParams& p, double u) {
    const std::vector<double> z = z_of(logits_V, n, p.temperature);
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    const auto before = [&](int64_t a, int64_t b) { return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b); };
    const int64_t k = p.top_k > 0 ? std::min(p.top_k, n) : n;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    order.resize(size_t(k));
    const double z_max = z[size_t(order.front())];
    std::vector<double> probs(order.size());
    double total = 0;
    for (size_t i = 0; i < order.size(); ++i) total += probs[i] = std::exp(z[size_t(order[i])] - z_max);
    size_t keep = order.size();
    if (p.top_p < 1.0) {
      double mass = 0;
      for (size_t i = 0; i < order.size(); ++i) {
        mass += probs[i] / total;
        if (mass >= p.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    probs.resize(keep);
    const double kept_total = std::accumulate(probs.begin(), probs.end(), 0.0);
    double cumulative = 0;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / kept_total;
      if (u < cumulative) return order[i];
    }
    return order[keep - 1];
  }
  static double logprob(TensorView logits_V, int64_t token, double temperature) {
    const std::vector<double> z = z_of(logits_V, logits_V.size(0), temperature);
    double z_max = -INFINITY;
    for (double x : z) z_max = std::max(z_max, x);
    double sum = 0;
    for (double x : z) sum += std::exp(x - z_max);
    return z[size_t(token)] - z_max - std::log(sum);
  }
};

// Rows of 8192 logits with ties, +0 and -0, in f32 and bf16 (bf16 ties a lot), contiguous and strided,
// and with one outlier, which leaves the radix sort's keys too coarse to tell most logits apart.
TEST(Sampling, FastDrawIsTheSortingReferenceBitForBit) {
  constexpr int64_t V = 8192;
  int checked = 0;
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const int64_t stride : {1, 3}) {
      for (const double outlier : {0.0, -1e9}) {
        Tensor storage({V, stride}, dtype);
        fill_normal(storage, Philox(uint64_t(stride) * 7 + uint64_t(dtype == DType::f32), 0), 0.0, 2.0);
        const TensorView logits = storage.view().select(1, 0);
        for (int64_t v = 0; v < V; v += 97) store_f64(logits, v * stride, load_f64(logits, 5 * stride));  // ties
        store_f64(logits, 11 * stride, 0.0);
        store_f64(logits, 12 * stride, -0.0);
        if (outlier != 0.0) store_f64(logits, 13 * stride, outlier);
        for (const SamplingParams& p :
             {SamplingParams{}, SamplingParams{.temperature = 0.7}, SamplingParams{.temperature = 1.3, .top_p = 0.9},
              SamplingParams{.top_k = 40}, SamplingParams{.top_k = 3000, .top_p = 0.5}}) {
          for (const int64_t n : {V, V - 100}) {
            for (const double u : {0.0, 0.013, 0.25, 0.5, 0.77, 0.999, 0.9999999}) {
              SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " stride " << stride << " outlier " << outlier
                                                << " T " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
                                                << " n " << n << " u " << u);
              const int64_t want = SortingReference::sample(logits, n, p, u);
              ASSERT_EQ(sample_token(logits, n, p, u), want);
              for (const double logprob_temperature : {p.temperature, 1.0}) {
                const double want_logprob = SortingReference::logprob(logits, want, logprob_temperature);
                EXPECT_EQ(token_logprob(logits, want, logprob_temperature), want_logprob);
                const auto [token, logprob] = sample_token_with_logprob(logits, n, p, u, logprob_temperature);
                EXPECT_EQ(token, want);
                EXPECT_EQ(logprob, want_logprob);  // bit for bit
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 2 * 5 * 2 * 7 * 2);
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
