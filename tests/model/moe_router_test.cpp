// The MoE router (megatron.md §6.2): hand-computed choices and weights for each score function, the expert bias
// steering the choice only, group-limited routing, ties, finite differences of the backward for every mode, and the
// configuration errors by key; router replay (given experts): bit-exact on the router's own choice, weights by
// hand on others, finite differences of its backward.
#include "model/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/element_access.h"
#include "core/philox.h"

namespace rf::model {
namespace {

struct Routed {
  Tensor probs, map;
  RouterSaved saved;
};

Tensor row_tensor(const std::vector<std::vector<double>>& rows) {
  Tensor t({int64_t(rows.size()), int64_t(rows[0].size())}, DType::f64);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t e = 0; e < rows[r].size(); ++e) t.data<double>()[r * rows[r].size() + e] = rows[r][e];
  return t;
}

Routed route(const RouterConfig& c, const Tensor& logits, const Tensor& bias = Tensor()) {
  Routed r{Tensor({logits.size(0), c.num_experts}, DType::f64), Tensor({logits.size(0), c.num_experts}, DType::u8), {}};
  route_forward(c, logits, bias, r.probs, r.map, r.saved);
  return r;
}

double at(const Tensor& t, int64_t row, int64_t col) { return load_f64(t, row * t.size(1) + col); }

TEST(MoeRouter, SoftmaxOverTheTopKLogits) {
  const RouterConfig c{.num_experts = 4, .top_k = 2};
  const Routed r = route(c, row_tensor({{1, 3, 2, 0}}));
  const double e = std::exp(1.0);
  EXPECT_NEAR(at(r.probs, 0, 1), e / (e + 1), 1e-15);
  EXPECT_NEAR(at(r.probs, 0, 2), 1 / (e + 1), 1e-15);
  EXPECT_EQ(at(r.probs, 0, 0), 0.0);
  EXPECT_EQ(at(r.map, 0, 1) + at(r.map, 0, 2), 2.0);
  EXPECT_EQ(at(r.map, 0, 0) + at(r.map, 0, 3), 0.0);
}

TEST(MoeRouter, PreSoftmaxRenormalisedEqualsSoftmaxOverTheTopK) {
  const Tensor logits = row_tensor({{0.3, -1.2, 2.5, 0.9, 0.1}, {1, 1.5, -2, 0, 0.7}});
  const Routed top = route({.num_experts = 5, .top_k = 3}, logits);
  const Routed pre = route({.num_experts = 5, .top_k = 3, .pre_softmax = true, .normalize_topk = true}, logits);
  const Routed raw = route({.num_experts = 5, .top_k = 3, .pre_softmax = true}, logits);
  double raw_sum = 0;
  for (int64_t e = 0; e < 5; ++e) {
    EXPECT_NEAR(at(pre.probs, 0, e), at(top.probs, 0, e), 1e-15);
    EXPECT_NEAR(at(pre.probs, 1, e), at(top.probs, 1, e), 1e-15);
    raw_sum += at(raw.probs, 0, e);
  }
  EXPECT_LT(raw_sum, 1.0);  // Qwen2-MoE without norm_topk_prob: the probabilities of all E at the chosen
}

TEST(MoeRouter, SigmoidBiasSteersTheChoiceOnly) {
  const RouterConfig c{.num_experts = 3, .top_k = 1, .score = RouterScore::sigmoid, .scaling_factor = 2.5};
  const Tensor logits = row_tensor({{2.0, 1.0, -1.0}});
  Tensor bias({3}, DType::f64);
  bias.data<double>()[0] = 0;
  bias.data<double>()[1] = 0.5;  // sigmoid(1) + 0.5 > sigmoid(2)
  bias.data<double>()[2] = 0;
  const Routed r = route(c, logits, bias);
  EXPECT_EQ(at(r.map, 0, 1), 1.0);
  EXPECT_NEAR(at(r.probs, 0, 1), 2.5 / (1 + std::exp(-1.0)), 1e-15);  // the unbiased score, scaled
}

TEST(MoeRouter, GroupLimitedRoutingKeepsTheBestGroups) {
  // 8 experts in 4 groups of 2, 2 groups kept, top 4 (2 per group). Expert 0 alone scores highest, but its group's
  // two best sum lower than groups 2's and 3's.
  const RouterConfig c{.num_experts = 8, .top_k = 4, .score = RouterScore::sigmoid, .num_groups = 4, .group_topk = 2};
  const Routed r = route(c, row_tensor({{5, -5, 0, 0, 2, 2, 1.5, 1.5}}));
  for (int64_t e : {4, 5, 6, 7}) EXPECT_EQ(at(r.map, 0, e), 1.0) << e;
  for (int64_t e : {0, 1, 2, 3}) EXPECT_EQ(at(r.map, 0, e), 0.0) << e;
}

TEST(MoeRouter, TiesGoToTheLowerExpert) {
  const Routed r = route({.num_experts = 4, .top_k = 2}, row_tensor({{1, 2, 2, 2}}));
  EXPECT_EQ(at(r.map, 0, 1) + at(r.map, 0, 2), 2.0);
  EXPECT_EQ(at(r.map, 0, 3), 0.0);
}

// dlogits against central differences of `loss` at each logit.
template <class Loss>
void expect_central_differences(const Tensor& logits, const Tensor& dlogits, Loss&& loss) {
  constexpr double h = 1e-6;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    Tensor plus = clone(logits, DType::f64), minus = clone(logits, DType::f64);
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    const double fd = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(dlogits.data<double>()[i], fd, 1e-8 * std::max(1.0, std::abs(fd))) << "logit " << i;
  }
}

// dL/dlogits of L = sum w_te probs_te against central differences, for logits whose choice no step of h changes.
void check_backward(const RouterConfig& c, bool with_bias) {
  constexpr int64_t T = 5;
  const int64_t E = c.num_experts;
  const Philox rng(11, uint64_t(c.top_k * 100 + E));
  Tensor logits({T, E}, DType::f64), weights({T, E}, DType::f64), bias;
  for (int64_t i = 0; i < T * E; ++i) {
    logits.data<double>()[i] = 4.0 * (rng.uniform(uint64_t(i)) - 0.5) + 0.37 * double(i % E);
    weights.data<double>()[i] = rng.uniform(uint64_t(1000 + i)) - 0.5;
  }
  if (with_bias) {
    bias = Tensor({E}, DType::f64);
    for (int64_t e = 0; e < E; ++e) bias.data<double>()[e] = 0.01 * double(e % 3);
  }
  auto loss = [&](const Tensor& x) {
    const Routed r = route(c, x, bias);
    double sum = 0;
    for (int64_t i = 0; i < T * E; ++i) sum += weights.data<double>()[i] * r.probs.data<double>()[i];
    return sum;
  };
  const Routed r = route(c, logits, bias);
  Tensor dlogits({T, E}, DType::f64);
  route_backward(c, r.saved, r.map, weights, dlogits);
  constexpr double h = 1e-6;
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor plus = clone(logits, DType::f64), minus = clone(logits, DType::f64);
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    const Routed rp = route(c, plus, bias), rm = route(c, minus, bias);
    ASSERT_EQ(std::memcmp(rp.map.view().raw(), r.map.view().raw(), size_t(T * E)), 0) << "the choice moved";
    ASSERT_EQ(std::memcmp(rm.map.view().raw(), r.map.view().raw(), size_t(T * E)), 0) << "the choice moved";
    const double fd = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(dlogits.data<double>()[i], fd, 1e-8 * std::max(1.0, std::abs(fd))) << "logit " << i;
  }
}

TEST(MoeRouter, BackwardMatchesFiniteDifferences) {
  check_backward({.num_experts = 6, .top_k = 2}, false);
  check_backward({.num_experts = 6, .top_k = 3, .pre_softmax = true}, false);
  check_backward({.num_experts = 6, .top_k = 3, .pre_softmax = true, .normalize_topk = true}, false);
  check_backward({.num_experts = 6, .top_k = 2, .score = RouterScore::sigmoid}, true);
  check_backward({.num_experts = 8,
                  .top_k = 4,
                  .score = RouterScore::sigmoid,
                  .normalize_topk = true,
                  .scaling_factor = 2.5,
                  .num_groups = 4,
                  .group_topk = 2},
                 true);
}

// Router replay: the free choice recorded (routed_experts) and replayed gives the same bits, in every mode.
std::vector<RouterConfig> all_modes() {
  return {{.num_experts = 6, .top_k = 2},
          {.num_experts = 6, .top_k = 3, .pre_softmax = true},
          {.num_experts = 6, .top_k = 3, .pre_softmax = true, .normalize_topk = true},
          {.num_experts = 6, .top_k = 2, .score = RouterScore::sigmoid, .normalize_topk = true, .scaling_factor = 2.5},
          {.num_experts = 8,
           .top_k = 4,
           .score = RouterScore::sigmoid,
           .normalize_topk = true,
           .scaling_factor = 2.5,
           .num_groups = 4,
           .group_topk = 2}};
}

Tensor random_logits(int64_t T, int64_t E, uint64_t seed) {
  const Philox rng(seed, 7);
  Tensor logits({T, E}, DType::f32);
  for (int64_t i = 0; i < T * E; ++i) logits.data<float>()[i] = float(4.0 * (rng.uniform(uint64_t(i)) - 0.5));
  return logits;
}

TEST(MoeRouterReplay, ReplayingTheOwnChoiceIsBitExact) {
  constexpr int64_t T = 9;
  for (const RouterConfig& c : all_modes()) {
    const int64_t E = c.num_experts;
    const Tensor logits = random_logits(T, E, uint64_t(E * 10 + c.top_k));
    Tensor probs({T, E}, DType::f32), map({T, E}, DType::u8), experts({T, c.top_k}, DType::i32);
    RouterSaved saved;
    route_forward(c, logits, Tensor(), probs, map, saved);
    routed_experts(map, c.top_k, experts);
    // Any order of the given experts: reversed here.
    Tensor reversed({T, c.top_k}, DType::i32);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < c.top_k; ++i)
        reversed.data<int32_t>()[t * c.top_k + i] = experts.data<int32_t>()[t * c.top_k + c.top_k - 1 - i];
    for (int64_t i = 1; i < c.top_k; ++i) EXPECT_LT(experts.data<int32_t>()[i - 1], experts.data<int32_t>()[i]);
    for (const Tensor* given : {&experts, &reversed}) {
      Tensor rprobs({T, E}, DType::f32), rmap({T, E}, DType::u8);
      RouterSaved rsaved;
      route_forward_replayed(c, logits, Tensor(), *given, rprobs, rmap, rsaved);
      EXPECT_EQ(std::memcmp(rprobs.view().raw(), probs.view().raw(), size_t(T * E) * 4), 0);
      EXPECT_EQ(std::memcmp(rmap.view().raw(), map.view().raw(), size_t(T * E)), 0);
      EXPECT_EQ(std::memcmp(rsaved.scores_TE.view().raw(), saved.scores_TE.view().raw(), size_t(T * E) * 8), 0);
    }
  }
}

Tensor experts_of(const std::vector<std::vector<int32_t>>& rows) {
  Tensor t({int64_t(rows.size()), int64_t(rows[0].size())}, DType::i32);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].size(); ++i) t.data<int32_t>()[r * rows[r].size() + i] = rows[r][i];
  return t;
}

TEST(MoeRouterReplay, OtherExpertsGetTheirWeightsByHand) {
  const Tensor logits = row_tensor({{1, 3, 2, 0}});
  const Tensor given = experts_of({{3, 0}});  // not the top 2 (experts 1 and 2)
  Tensor probs({1, 4}, DType::f64), map({1, 4}, DType::u8);
  RouterSaved saved;
  // Softmax over the given logits 1 and 0.
  route_forward_replayed({.num_experts = 4, .top_k = 2}, logits, Tensor(), given, probs, map, saved);
  const double e = std::exp(1.0);
  EXPECT_NEAR(at(probs, 0, 0), e / (e + 1), 1e-15);
  EXPECT_NEAR(at(probs, 0, 3), 1 / (e + 1), 1e-15);
  EXPECT_EQ(at(probs, 0, 1) + at(probs, 0, 2), 0.0);
  EXPECT_EQ(at(map, 0, 0) + at(map, 0, 3), 2.0);
  EXPECT_EQ(at(map, 0, 1) + at(map, 0, 2), 0.0);
  // Pre-softmax without renormalisation: the full softmax's probabilities at the given experts.
  route_forward_replayed({.num_experts = 4, .top_k = 2, .pre_softmax = true}, logits, Tensor(), given, probs, map,
                         saved);
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(at(probs, 0, 0), std::exp(1.0) / z, 1e-15);
  EXPECT_NEAR(at(probs, 0, 3), 1.0 / z, 1e-15);
  // Sigmoid, renormalised and scaled; the bias (which favours expert 1) does not change the given choice.
  Tensor bias({4}, DType::f64);
  for (int64_t i = 0; i < 4; ++i) bias.data<double>()[i] = i == 1 ? 1.0 : 0.0;
  route_forward_replayed({.num_experts = 4, .top_k = 2, .score = RouterScore::sigmoid, .normalize_topk = true,
                          .scaling_factor = 2.0},
                         logits, bias, given, probs, map, saved);
  const double s0 = 1 / (1 + std::exp(-1.0)), s3 = 0.5;
  EXPECT_NEAR(at(probs, 0, 0), 2.0 * s0 / (s0 + s3 + 1e-20), 1e-15);
  EXPECT_NEAR(at(probs, 0, 3), 2.0 * s3 / (s0 + s3 + 1e-20), 1e-15);
  EXPECT_EQ(at(probs, 0, 1), 0.0);
}

TEST(MoeRouterReplay, RefusesBadExperts) {
  const RouterConfig c{.num_experts = 4, .top_k = 2};
  Tensor probs({1, 4}, DType::f64), map({1, 4}, DType::u8);
  RouterSaved saved;
  const Tensor logits = row_tensor({{1, 3, 2, 0}});
  EXPECT_THROW(route_forward_replayed(c, logits, Tensor(), experts_of({{1, 1}}), probs, map, saved), Error);
  EXPECT_THROW(route_forward_replayed(c, logits, Tensor(), experts_of({{1, 4}}), probs, map, saved), Error);
  EXPECT_THROW(route_forward_replayed(c, logits, Tensor(), experts_of({{1, 2, 3}}), probs, map, saved), Error);
}

// The replayed router's backward (route_backward with the replayed map) against central differences: the experts
// are fixed, so every logit may move, here with experts far from the top k.
TEST(MoeRouterReplay, BackwardMatchesFiniteDifferences) {
  constexpr int64_t T = 5;
  for (const RouterConfig& c : all_modes()) {
    const int64_t E = c.num_experts;
    const Philox rng(13, uint64_t(E * 10 + c.top_k));
    Tensor logits({T, E}, DType::f64), weights({T, E}, DType::f64), given({T, c.top_k}, DType::i32);
    for (int64_t i = 0; i < T * E; ++i) {
      logits.data<double>()[i] = 4.0 * (rng.uniform(uint64_t(i)) - 0.5);
      weights.data<double>()[i] = rng.uniform(uint64_t(1000 + i)) - 0.5;
    }
    for (int64_t t = 0; t < T; ++t)  // experts t, t + 1, ... (mod E): distinct, mostly not the top k
      for (int64_t i = 0; i < c.top_k; ++i) given.data<int32_t>()[t * c.top_k + i] = int32_t((t + i) % E);
    auto forward = [&](const Tensor& x, Tensor& probs, Tensor& map, RouterSaved& saved) {
      route_forward_replayed(c, x, Tensor(), given, probs, map, saved);
    };
    auto loss = [&](const Tensor& x) {
      Tensor probs({T, E}, DType::f64), map({T, E}, DType::u8);
      RouterSaved saved;
      forward(x, probs, map, saved);
      double sum = 0;
      for (int64_t i = 0; i < T * E; ++i) sum += weights.data<double>()[i] * probs.data<double>()[i];
      return sum;
    };
    Tensor probs({T, E}, DType::f64), map({T, E}, DType::u8), dlogits({T, E}, DType::f64);
    RouterSaved saved;
    forward(logits, probs, map, saved);
    route_backward(c, saved, map, weights, dlogits);
    expect_central_differences(logits, dlogits, loss);
  }
}

TEST(MoeRouter, RefusesConfigurationsByKey) {
  auto key_of = [](const RouterConfig& c) {
    try {
      c.validate("model.config.");
    } catch (const ConfigError& e) {
      return e.key_path();
    }
    return std::string();
  };
  EXPECT_EQ(key_of({.num_experts = 4, .top_k = 5}), "model.config.num_experts_per_tok");
  EXPECT_EQ(key_of({.num_experts = 6, .top_k = 2, .num_groups = 4, .group_topk = 1}), "model.config.n_group");
  EXPECT_EQ(key_of({.num_experts = 8, .top_k = 3, .num_groups = 4, .group_topk = 2}), "model.config.topk_group");
  EXPECT_EQ(key_of({.num_experts = 8, .top_k = 2, .score = RouterScore::sigmoid, .pre_softmax = true}),
            "model.config.pre_softmax");
  EXPECT_EQ(key_of({.num_experts = 8, .top_k = 2}), "");
}

}  // namespace
}  // namespace rf::model
