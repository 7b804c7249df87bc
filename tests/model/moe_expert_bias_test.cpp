// The aux-loss-free expert bias (megatron.md §6.5): counting routed real tokens over forwards, the sign update in
// f32 with sign(0) = 0, the counter's reset, and the configuration errors by key.
#include "model/moe_expert_bias.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_support.h"

namespace rf::model {
namespace {

using rf::testing::expect_config_error;

Tensor routing_map(const std::vector<std::vector<int>>& rows) {
  Tensor map({int64_t(rows.size()), int64_t(rows[0].size())}, DType::u8);
  for (size_t t = 0; t < rows.size(); ++t)
    for (size_t e = 0; e < rows[t].size(); ++e) map.data<uint8_t>()[t * rows[t].size() + e] = uint8_t(rows[t][e]);
  return map;
}

TEST(MoeExpertBias, CountsRoutedRealTokensOverForwards) {
  Tensor counts({4}, DType::i64);
  std::fill_n(counts.data<int64_t>(), 4, 0);
  Tensor valid({3}, DType::u8);
  valid.data<uint8_t>()[0] = 1;
  valid.data<uint8_t>()[1] = 0;  // padding: its routing does not count
  valid.data<uint8_t>()[2] = 1;
  add_routed_counts(routing_map({{1, 1, 0, 0}, {0, 0, 1, 1}, {1, 0, 1, 0}}), valid, counts);
  add_routed_counts(routing_map({{1, 0, 0, 1}}), Tensor(), counts);  // a second forward accumulates
  EXPECT_EQ(std::vector<int64_t>(counts.data<int64_t>(), counts.data<int64_t>() + 4),
            (std::vector<int64_t>{3, 1, 1, 1}));
}

TEST(MoeExpertBias, MovesTowardBalanceAndResetsTheCounter) {
  // Counts 3, 1, 2, 2: mean 2, so expert 0 is overloaded (down), expert 1 underloaded (up), 2 and 3 stay.
  Tensor counts({4}, DType::f64), bias({4}, DType::f32);
  const double c[4] = {3, 1, 2, 2};
  std::copy_n(c, 4, counts.data<double>());
  std::fill_n(bias.data<float>(), 4, 0.1f);
  update_expert_bias(1e-3, counts, bias);
  EXPECT_EQ(bias.data<float>()[0], 0.1f - 1e-3f);
  EXPECT_EQ(bias.data<float>()[1], 0.1f + 1e-3f);
  EXPECT_EQ(bias.data<float>()[2], 0.1f);
  EXPECT_EQ(bias.data<float>()[3], 0.1f);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(counts.data<double>()[e], 0.0);
  update_expert_bias(1e-3, counts, bias);  // balanced (all zero): nothing moves
  EXPECT_EQ(bias.data<float>()[0], 0.1f - 1e-3f);
}

TEST(MoeExpertBias, RefusesConfigurationsByKey) {
  auto validate = [](const ExpertBiasConfig& c, RouterScore score) {
    return [c, score] { c.validate("model.", score); };
  };
  expect_config_error(validate({.enabled = true}, RouterScore::softmax), "model.moe_router_enable_expert_bias",
                      "sigmoid");
  expect_config_error(validate({.enabled = true, .update_rate = 0}, RouterScore::sigmoid),
                      "model.moe_router_bias_update_rate", "positive");
  EXPECT_NO_THROW(validate({.enabled = true}, RouterScore::sigmoid)());
  EXPECT_NO_THROW(validate({}, RouterScore::softmax)());
}

}  // namespace
}  // namespace rf::model
