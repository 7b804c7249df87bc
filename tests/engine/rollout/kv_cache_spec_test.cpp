// engine/rollout/kv_cache_spec.h: block bytes worked out by hand, and the sizing errors that name the
// config key to change.
#include "engine/rollout/kv_cache_spec.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "support/test_support.h"

namespace rf::engine::rollout {
namespace {

// 2 layers x 16 tokens x 2 kv heads x head_dim 8 x 2 bytes (bf16) x 2 (K and V) = 2048 bytes.
const KvCacheSpec kSpec{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = 16, .dtype = DType::bf16};

TEST(KvCacheSpec, BytesPerBlockAndBlocksForTokens) {
  EXPECT_EQ(kSpec.bytes_per_block(), 2048);
  KvCacheSpec f32 = kSpec;
  f32.dtype = DType::f32;
  EXPECT_EQ(f32.bytes_per_block(), 4096);
  EXPECT_EQ(kSpec.blocks_for_tokens(0), 0);
  EXPECT_EQ(kSpec.blocks_for_tokens(1), 1);
  EXPECT_EQ(kSpec.blocks_for_tokens(16), 1);
  EXPECT_EQ(kSpec.blocks_for_tokens(17), 2);
  EXPECT_EQ(kSpec.blocks_for_tokens(37), 3);
}

TEST(KvCacheSpec, ValidateNamesTheField) {
  KvCacheSpec bad = kSpec;
  bad.block_size = 0;
  testing::expect_error_containing([&] { bad.validate(); }, "block_size");
  bad = kSpec;
  bad.num_kv_heads = -1;
  testing::expect_error_containing([&] { bad.validate(); }, "num_kv_heads");
  bad = kSpec;
  bad.dtype = DType::i32;
  testing::expect_error_containing([&] { bad.validate(); }, "floating");
}

TEST(KvCacheSpec, NumBlocksForBudgetRoundsDownAndNeedsOneLongestSequence) {
  EXPECT_EQ(num_kv_blocks_for_budget(kSpec, 10 * 2048 + 2047, 160, "rollout.kv_cache_bytes"), 10);
  try {
    num_kv_blocks_for_budget(kSpec, 10 * 2048 + 2047, 161, "rollout.kv_cache_bytes");
    ADD_FAILURE() << "161 tokens need 11 blocks, the budget holds 10";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "rollout.kv_cache_bytes");
    EXPECT_NE(std::string(e.what()).find("holds 10 KV blocks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_model_len=161 tokens needs 11 blocks"), std::string::npos) << e.what();
  }
  EXPECT_THROW(num_kv_blocks_for_budget(kSpec, 0, 1, "rollout.gpu_memory_utilization"), ConfigError);
}

TEST(KvCacheSpec, BudgetFromBytesOrFromUtilizationOfTheDeviceTier) {
  const KvCacheBudget explicit_bytes = kv_cache_budget(int64_t(1) << 20, 0.9, 0, 0);
  EXPECT_EQ(explicit_bytes.bytes, int64_t(1) << 20);
  EXPECT_EQ(explicit_bytes.key, "rollout.kv_cache_bytes");

  const int64_t gib = int64_t(1) << 30;
  const KvCacheBudget from_fraction = kv_cache_budget(std::nullopt, 0.5, 4 * gib, gib / 2, "actor_rollout_ref.rollout");
  EXPECT_EQ(from_fraction.bytes, 2 * gib - gib / 2);
  EXPECT_EQ(from_fraction.key, "actor_rollout_ref.rollout.gpu_memory_utilization");
}

TEST(KvCacheSpec, BudgetErrorsNameTheKey) {
  const int64_t gib = int64_t(1) << 30;
  auto expect_key = [](const std::function<void()>& fn, const std::string& key, const std::string& fragment) {
    try {
      fn();
      ADD_FAILURE() << "expected a ConfigError on " << key;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), key);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_key([&] { kv_cache_budget(int64_t(-5), 0.5, gib, 0); }, "rollout.kv_cache_bytes", "must be positive");
  expect_key([&] { kv_cache_budget(std::nullopt, 1.5, gib, 0); }, "rollout.gpu_memory_utilization", "(0, 1]");
  expect_key([&] { kv_cache_budget(std::nullopt, 0.5, 0, 0); }, "rollout.gpu_memory_utilization",
             "resources.device_memory_gb");
  expect_key([&] { kv_cache_budget(std::nullopt, 0.5, gib, gib); }, "rollout.gpu_memory_utilization",
             "leaves nothing");
}

}  // namespace
}  // namespace rf::engine::rollout
