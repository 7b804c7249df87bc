// Every advantage estimator against its plain loop twin, on random batches: several shapes (T = 1,
// one row, more rows than groups), masks with holes and fully masked rows, groups of unequal sizes
// in shuffled order (singletons included wherever the estimator accepts them), binary, continuous
// and dense rewards, f32 and f64, and strided views. Both must agree, including on raising.
//
// Dimension legend: B batch (responses), T response tokens.
#include <gtest/gtest.h>

#include <optional>

#include "core/element_access.h"
#include "rl/advantage_estimator.h"
#include "rl_test_data.h"
#include "support/test_support.h"

namespace rf::testing {
namespace {

struct TwinCase {
  int64_t B, T;
  int64_t min_group_size;  // 1 lets singletons in
  RewardKind rewards;
  DType dtype;
  rl::AdvantageConfig config;
};

std::vector<TwinCase> twin_cases() {
  std::vector<TwinCase> cases;
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 1}, {1, 6}, {2, 3}, {5, 7}, {8, 1}, {13, 9}, {32, 17}};
  const std::vector<rl::AdvantageConfig> configs{
      {1.0, 1.0, true, 1e-6}, {0.99, 0.95, false, 1e-6}, {0.9, 0.8, true, 1e-6}};
  for (const auto& [B, T] : shapes)
    for (int64_t min_group_size : {1, 2})
      for (RewardKind rewards : {RewardKind::binary, RewardKind::continuous, RewardKind::dense})
        for (DType dtype : {DType::f32, DType::f64})
          for (const rl::AdvantageConfig& config : configs)
            cases.push_back({B, T, min_group_size, rewards, dtype, config});
  return cases;
}

struct TwinOutputs {
  std::optional<std::string> error;
  Tensor advantages, returns;
};

TwinOutputs run(rl::AdvantageFn fn, const rl::AdvantageInputs& in, const rl::AdvantageConfig& config, Shape shape,
                DType dtype) {
  TwinOutputs out{std::nullopt, Tensor(shape, dtype), Tensor(shape, dtype)};
  try {
    fn(in, config, {out.advantages, out.returns});
  } catch (const Error& e) {
    out.error = e.what();
  }
  return out;
}

TEST(AdvantageTwins, VectorisedMatchesLoopOnRandomBatches) {
  uint64_t seed = 1;
  for (const rl::AdvantageEstimator& estimator : rl::advantage_estimators()) {
    int64_t num_compared = 0;
    for (const TwinCase& c : twin_cases()) {
      ++seed;
      const Tensor mask = random_response_mask(c.B, c.T, seed);
      const Tensor rewards = random_rewards(mask, c.rewards, c.dtype, seed);
      const Tensor values = random_tensor({c.B, c.T}, c.dtype, seed, -1.0, 1.0);
      const Tensor baselines = random_tensor({c.B}, c.dtype, seed + 1, -0.5, 1.5);
      const rl::GroupIndex index(random_group_labels(c.B, c.min_group_size, seed));
      const rl::AdvantageInputs in{rewards, mask, values, baselines, &index};
      const std::string what =
          fmt::format("{} B={} T={} min_group={} dtype={} gamma={} norm={}", estimator.name, c.B, c.T, c.min_group_size,
                      dtype_name(c.dtype), c.config.gamma, c.config.norm_adv_by_std_in_grpo);
      const TwinOutputs fast = run(estimator.compute, in, c.config, {c.B, c.T}, c.dtype);
      const TwinOutputs loop = run(estimator.compute_loop, in, c.config, {c.B, c.T}, c.dtype);
      ASSERT_EQ(fast.error.has_value(), loop.error.has_value())
          << what << ": one raised and the other did not: " << fast.error.value_or(loop.error.value_or(""));
      if (fast.error) continue;
      // Both compute in f64 in different orders; an f32 result may differ by the last rounding.
      const double rtol = c.dtype == DType::f32 ? 1e-6 : 1e-11, atol = c.dtype == DType::f32 ? 1e-6 : 1e-11;
      expect_close(fast.advantages, loop.advantages, rtol, atol, what + " advantages");
      expect_close(fast.returns, loop.returns, rtol, atol, what + " returns");
      ++num_compared;
    }
    // Most draws are valid for every estimator; a twin test that never compares would prove nothing.
    EXPECT_GT(num_compared, int64_t(twin_cases().size()) / 2) << estimator.name;
  }
}

TEST(AdvantageTwins, StridedViewsGiveTheContiguousResult) {
  const int64_t B = 9, T = 6;
  const Tensor mask = random_response_mask(B, T, 11);
  const Tensor rewards = random_rewards(mask, RewardKind::dense, DType::f32, 11);
  const Tensor values = random_tensor({B, T}, DType::f32, 12);
  const Tensor baselines = random_tensor({B}, DType::f32, 13);
  const rl::GroupIndex index(random_group_labels(B, 2, 11));
  const GuardedTensor strided_mask = guarded_copy(mask, Layout::strided);
  const GuardedTensor strided_rewards = guarded_copy(rewards, Layout::strided);
  const GuardedTensor strided_values = guarded_copy(values, Layout::strided);
  for (const rl::AdvantageEstimator& estimator : rl::advantage_estimators()) {
    Tensor advantages({B, T}, DType::f32), returns({B, T}, DType::f32);
    estimator.compute({rewards, mask, values, baselines, &index}, {}, {advantages, returns});
    GuardedTensor strided_advantages({B, T}, DType::f32, Layout::strided);
    GuardedTensor strided_returns({B, T}, DType::f32, Layout::strided);
    estimator.compute({strided_rewards, strided_mask, strided_values, baselines, &index}, {},
                      {strided_advantages, strided_returns});
    expect_close(strided_advantages, advantages, 0, 0, std::string(estimator.name) + " advantages");
    expect_close(strided_returns, returns, 0, 0, std::string(estimator.name) + " returns");
    strided_advantages.expect_sentinels_intact(std::string(estimator.name) + " advantages");
    strided_returns.expect_sentinels_intact(std::string(estimator.name) + " returns");
  }
}

TEST(GroupIndex, NumbersGroupsInOrderOfFirstAppearance) {
  const rl::GroupIndex by_number(std::vector<int64_t>{931, 7, 931, 42, 7});
  EXPECT_EQ(by_number.num_groups(), 3);
  EXPECT_EQ(std::vector<int64_t>({by_number.group_of(0), by_number.group_of(1), by_number.group_of(2),
                                  by_number.group_of(3), by_number.group_of(4)}),
            std::vector<int64_t>({0, 1, 0, 2, 1}));
  EXPECT_EQ(by_number.group_size(0), 2);
  EXPECT_EQ(by_number.group_size(2), 1);
  EXPECT_EQ(by_number.label(0), "931");
  const rl::GroupIndex by_uid(std::vector<std::string>{"b-uid", "a-uid", "b-uid"});
  EXPECT_EQ(by_uid.num_groups(), 2);
  EXPECT_EQ(by_uid.group_of(2), 0);
  EXPECT_EQ(by_uid.label(1), "a-uid");
}

TEST(AdvantageEstimators, MissingInputsAreNamed) {
  const Tensor mask = random_response_mask(4, 3, 5);
  const Tensor rewards = random_rewards(mask, RewardKind::binary, DType::f32, 5);
  Tensor advantages({4, 3}, DType::f32), returns({4, 3}, DType::f32);
  try {
    rl::compute_grpo_advantages({rewards, mask, {}, {}, nullptr}, {}, {advantages, returns});
    ADD_FAILURE() << "grpo without an index did not raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grpo: needs the group index"), std::string::npos) << e.what();
  }
  try {
    rl::compute_gae_advantages({rewards, mask, {}, {}, nullptr}, {}, {advantages, returns});
    ADD_FAILURE() << "gae without values did not raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("values_BT"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf::testing
