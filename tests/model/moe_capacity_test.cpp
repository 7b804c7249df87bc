// Expert capacity (megatron.md §6.4): Megatron's rounding, both drop policies with ties, padding to capacity,
// nothing dropped when the capacity holds every token, in-place use, the dropped-pair count, the backward protocol
// with the router (finite differences through route_backward), and the configuration errors by key.
#include "model/moe_capacity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/philox.h"
#include "model/moe_router.h"
#include "support/test_support.h"

namespace rf::model {
namespace {

using rf::testing::expect_config_error;

// A routed batch of T = 5 tokens, E = 2 experts, top 1: expert 0 gets tokens 0-3 (probs 0.5 0.9 0.5 0.5),
// expert 1 token 4 (0.6).
struct Routing {
  Tensor probs{{5, 2}, DType::f64};
  Tensor map{{5, 2}, DType::u8};
  Routing() {
    const double p[5] = {0.5, 0.9, 0.5, 0.5, 0.6};
    for (int64_t t = 0; t < 5; ++t) {
      const int64_t e = t < 4 ? 0 : 1;
      for (int64_t c = 0; c < 2; ++c) {
        probs.data<double>()[t * 2 + c] = c == e ? p[t] : 0.0;
        map.data<uint8_t>()[t * 2 + c] = c == e;
      }
    }
  }
};

struct Kept {
  Tensor probs{{5, 2}, DType::f64};
  Tensor map{{5, 2}, DType::u8};
  int64_t dropped = 0;
};

Kept keep(const CapacityConfig& c, const Routing& r) {
  Kept k;
  k.dropped = apply_capacity(c, 1, r.probs, r.map, k.probs, k.map);
  return k;
}

// Tokens in expert e's column of the kept map.
std::vector<int64_t> column(const Kept& k, int64_t e) {
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < 5; ++t)
    if (k.map.data<uint8_t>()[t * 2 + e]) tokens.push_back(t);
  return tokens;
}

TEST(MoeCapacity, RoundsUpAsMegatron) {
  EXPECT_EQ(expert_capacity(10, 2, 4, 1.0), 5);
  EXPECT_EQ(expert_capacity(10, 2, 4, 1.2), 6);  // 5 * 1.2 is 6 in f64, not 6 + an ulp
  EXPECT_EQ(expert_capacity(7, 1, 4, 1.0), 2);
  EXPECT_EQ(expert_capacity(3, 2, 8, 0.1), 1);
  EXPECT_EQ(expert_capacity(5, 1, 2, 0.8), 2);
}

TEST(MoeCapacity, ProbsPolicyKeepsTheHighestProbsTiesToTheLowerToken) {
  // C = ceil(5 / 2 * 0.8) = 2: expert 0 keeps token 1 (0.9) and, of the tied 0.5s, token 0.
  const Routing r;
  const Kept k = keep({.capacity_factor = 0.8}, r);
  EXPECT_EQ(column(k, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(column(k, 1), (std::vector<int64_t>{4}));
  EXPECT_EQ(k.dropped, 2);
  EXPECT_EQ(k.probs.data<double>()[2 * 2], 0.0);  // dropped token 2
  EXPECT_EQ(k.probs.data<double>()[1 * 2], 0.9);
  EXPECT_EQ(k.probs.data<double>()[4 * 2 + 1], 0.6);
}

TEST(MoeCapacity, PositionPolicyKeepsTheEarliestRoutedTokens) {
  Routing r;
  r.probs.data<double>()[0] = 0.1;  // the earliest token is kept whatever its prob
  const Kept k = keep({.capacity_factor = 0.8, .drop_policy = TokenDropPolicy::position}, r);
  EXPECT_EQ(column(k, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(k.dropped, 2);
  EXPECT_EQ(k.probs.data<double>()[0], 0.1);
}

TEST(MoeCapacity, PadToCapacityFillsEveryExpertWithZeroProbTokens) {
  const Routing r;
  for (TokenDropPolicy policy : {TokenDropPolicy::probs, TokenDropPolicy::position}) {
    const Kept k = keep({.capacity_factor = 0.8, .drop_policy = policy, .pad_to_capacity = true}, r);
    EXPECT_EQ(column(k, 0), (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(column(k, 1), (std::vector<int64_t>{0, 4}));  // token 0 pads, the lowest unrouted index
    EXPECT_EQ(k.probs.data<double>()[0 * 2 + 1], 0.0);
    EXPECT_EQ(k.dropped, 2);
  }
}

TEST(MoeCapacity, NothingIsDroppedWhenTheCapacityHoldsEveryToken) {
  const Routing r;
  for (double factor : {0.0, 2.0, 10.0}) {  // dropless; C = 5 = T; C = 25 > T
    const Kept k = keep({.capacity_factor = factor}, r);
    EXPECT_EQ(k.dropped, 0);
    EXPECT_EQ(std::memcmp(k.map.view().raw(), r.map.view().raw(), 10), 0);
    EXPECT_EQ(std::memcmp(k.probs.view().raw(), r.probs.view().raw(), 10 * sizeof(double)), 0);
  }
  // Padding with C >= T: Megatron's capacity mask is every token, so every expert gets all of them.
  const Kept padded = keep({.capacity_factor = 2.0, .pad_to_capacity = true}, r);
  EXPECT_EQ(column(padded, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(padded.probs.data<double>()[1], 0.0);
}

TEST(MoeCapacity, WorksInPlace) {
  Routing r;
  const int64_t dropped = apply_capacity({.capacity_factor = 0.8}, 1, r.probs, r.map, r.probs, r.map);
  EXPECT_EQ(dropped, 2);
  EXPECT_EQ(r.map.data<uint8_t>()[2 * 2], 0);
  EXPECT_EQ(r.map.data<uint8_t>()[1 * 2], 1);
  EXPECT_EQ(r.probs.data<double>()[3 * 2], 0.0);
}

// The protocol the header documents: route, drop, use the kept probs; backward masks dprobs by the kept map and
// gives route_backward the router's own (pre-drop) map. Checked against central differences of the logits.
TEST(MoeCapacity, BackwardThroughDroppingMatchesFiniteDifferences) {
  constexpr int64_t T = 8, E = 4;
  const RouterConfig router{.num_experts = E, .top_k = 2};
  const CapacityConfig capacity{.capacity_factor = 1.0};  // C = 4: the skewed logits overload expert 3
  const Philox rng(5, 3);
  Tensor logits({T, E}, DType::f64), weights({T, E}, DType::f64);
  for (int64_t i = 0; i < T * E; ++i) {
    logits.data<double>()[i] = 3.0 * (rng.uniform(uint64_t(i)) - 0.5) + 0.8 * double(i % E);
    weights.data<double>()[i] = rng.uniform(uint64_t(100 + i)) - 0.5;
  }
  auto forward = [&](const Tensor& x, Tensor& probs, Tensor& map, Tensor& kept_probs, Tensor& kept_map,
                     RouterSaved& saved) {
    route_forward(router, x, Tensor(), probs, map, saved);
    return apply_capacity(capacity, router.top_k, probs, map, kept_probs, kept_map);
  };
  auto loss = [&](const Tensor& x) {
    Tensor probs({T, E}, DType::f64), map({T, E}, DType::u8), kept_probs({T, E}, DType::f64),
        kept_map({T, E}, DType::u8);
    RouterSaved saved;
    forward(x, probs, map, kept_probs, kept_map, saved);
    double sum = 0;
    for (int64_t i = 0; i < T * E; ++i) sum += weights.data<double>()[i] * kept_probs.data<double>()[i];
    return sum;
  };
  Tensor probs({T, E}, DType::f64), map({T, E}, DType::u8), kept_probs({T, E}, DType::f64), kept_map({T, E}, DType::u8);
  RouterSaved saved;
  ASSERT_GT(forward(logits, probs, map, kept_probs, kept_map, saved), 0) << "the test wants dropped pairs";
  Tensor dprobs = clone(weights, DType::f64), dlogits({T, E}, DType::f64);
  mask_dropped_gradients(kept_map, dprobs);
  route_backward(router, saved, map, dprobs, dlogits);
  constexpr double h = 1e-6;
  for (int64_t i = 0; i < T * E; ++i) {
    Tensor plus = clone(logits, DType::f64), minus = clone(logits, DType::f64);
    plus.data<double>()[i] += h;
    minus.data<double>()[i] -= h;
    const double fd = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(dlogits.data<double>()[i], fd, 1e-8 * std::max(1.0, std::abs(fd))) << "logit " << i;
  }
}

TEST(MoeCapacity, RefusesConfigurationsByKey) {
  auto validate = [](const CapacityConfig& c) { return [c] { c.validate("actor.megatron."); }; };
  expect_config_error(validate({.capacity_factor = -1}), "actor.megatron.moe_expert_capacity_factor", "(0: dropless)");
  expect_config_error(validate({.capacity_factor = std::nan("")}), "actor.megatron.moe_expert_capacity_factor", "nan");
  expect_config_error(validate({.pad_to_capacity = true}), "actor.megatron.moe_pad_expert_input_to_capacity",
                      "moe_expert_capacity_factor > 0");
  const CapacityConfig padded{
      .capacity_factor = 1.25, .drop_policy = TokenDropPolicy::position, .pad_to_capacity = true};
  EXPECT_NO_THROW(validate(padded)());
  EXPECT_NO_THROW(validate({})());
}

}  // namespace
}  // namespace rf::model
