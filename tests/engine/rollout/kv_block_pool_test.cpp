// engine/rollout/kv_block_pool.h: the storage layout, block states and reference counts, copy_block,
// and the accounting rule (used blocks under kv_cache, the rest of the reservation under workspace,
// the tier total equal to the reservation) through release() and resume().
#include "engine/rollout/kv_block_pool.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace rf::engine::rollout {
namespace {

constexpr MemoryTier kDevice = MemoryTier::device;
// 3 layers x 4 tokens x 2 kv heads x head_dim 3 x 4 bytes x 2 = 576 bytes a block.
const KvCacheSpec kSpec{.num_layers = 3, .num_kv_heads = 2, .head_dim = 3, .block_size = 4, .dtype = DType::f32};
constexpr int64_t kBlockBytes = 576;

void expect_accounting(const MemoryTracker& tracker, const KvBlockPool& pool) {
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::kv_cache), pool.num_used() * kBlockBytes);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::workspace), (pool.num_blocks() - pool.num_used()) * kBlockBytes);
  EXPECT_EQ(tracker.current(kDevice), pool.reserved_bytes());
}

TEST(KvBlockPool, StorageIsOneKAndOneVTensorPerLayer) {
  KvBlockPool pool(kSpec, 5, nullptr);
  EXPECT_EQ(pool.bytes_per_block(), kBlockBytes);
  EXPECT_EQ(pool.reserved_bytes(), 5 * kBlockBytes);
  for (int64_t layer = 0; layer < 3; ++layer) {
    for (TensorView cache : {pool.keys(layer), pool.values(layer)}) {
      EXPECT_EQ(cache.shape(), (Shape{5, 4, 2, 3}));
      EXPECT_EQ(cache.dtype(), DType::f32);
      EXPECT_TRUE(cache.is_contiguous());
    }
  }
  EXPECT_NE(pool.keys(0).raw(), pool.values(0).raw());
  testing::expect_error_containing([&] { (void)pool.keys(3); }, "layer 3 out of range");
}

TEST(KvBlockPool, CopyBlockCopiesKAndVOfEveryLayerAndNothingElse) {
  KvBlockPool pool(kSpec, 4, nullptr);
  for (int64_t layer = 0; layer < 3; ++layer) {
    for (int64_t i = 0; i < 4 * 4 * 2 * 3; ++i) {
      pool.keys(layer).data<float>()[i] = float(1000 * layer + i);
      pool.values(layer).data<float>()[i] = float(-1000 * layer - i);
    }
  }
  pool.copy_block(1, 3);
  const int64_t per_block = 4 * 2 * 3;
  for (int64_t layer = 0; layer < 3; ++layer) {
    const float* k = pool.keys(layer).data<float>();
    const float* v = pool.values(layer).data<float>();
    for (int64_t i = 0; i < per_block; ++i) {
      EXPECT_EQ(k[3 * per_block + i], float(1000 * layer + per_block + i));
      EXPECT_EQ(v[3 * per_block + i], float(-1000 * layer - per_block - i));
      EXPECT_EQ(k[2 * per_block + i], float(1000 * layer + 2 * per_block + i)) << "block 2 untouched";
      EXPECT_EQ(k[per_block + i], float(1000 * layer + per_block + i)) << "source untouched";
    }
  }
  testing::expect_error_containing([&] { pool.copy_block(2, 2); }, "both block 2");
}

TEST(KvBlockPool, StatesRefCountsAndAccounting) {
  MemoryTracker tracker;
  KvBlockPool pool(kSpec, 4, &tracker);
  expect_accounting(tracker, pool);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::kv_cache), 0);

  EXPECT_EQ(pool.allocate(), 0);  // a fresh pool hands out 0, 1, 2, ...
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.state(0), KvBlockState::used);
  EXPECT_EQ(pool.ref_count(0), 1);
  expect_accounting(tracker, pool);

  // Sharing a block among 8 holders counts it once.
  for (int i = 0; i < 7; ++i) pool.add_ref(0);
  EXPECT_EQ(pool.ref_count(0), 8);
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::kv_cache), 2 * kBlockBytes);
  for (int i = 7; i > 0; --i) EXPECT_EQ(pool.remove_ref(0, OnLastRef::to_free_list), i);
  EXPECT_EQ(pool.state(0), KvBlockState::used);

  // The last reference: to the free list, or idle.
  EXPECT_EQ(pool.remove_ref(0, OnLastRef::keep_idle), 0);
  EXPECT_EQ(pool.state(0), KvBlockState::idle);
  EXPECT_EQ(pool.num_idle(), 1);
  EXPECT_EQ(pool.num_free(), 2);
  expect_accounting(tracker, pool);
  pool.add_ref(0);  // an idle block is used again
  EXPECT_EQ(pool.state(0), KvBlockState::used);
  EXPECT_EQ(pool.ref_count(0), 1);
  expect_accounting(tracker, pool);
  pool.remove_ref(0, OnLastRef::keep_idle);
  pool.free_idle(0);
  EXPECT_EQ(pool.state(0), KvBlockState::free);
  EXPECT_EQ(pool.allocate(), 0);  // the most recently freed block is reused first
  EXPECT_EQ(pool.remove_ref(1, OnLastRef::to_free_list), 0);
  EXPECT_EQ(pool.state(1), KvBlockState::free);
  expect_accounting(tracker, pool);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::kv_cache), 2 * kBlockBytes);
}

TEST(KvBlockPool, MisuseIsAnError) {
  KvBlockPool pool(kSpec, 2, nullptr);
  testing::expect_error_containing([&] { pool.add_ref(0); }, "block 0 is free");
  testing::expect_error_containing([&] { pool.remove_ref(1, OnLastRef::to_free_list); }, "block 1 is free, not used");
  testing::expect_error_containing([&] { pool.free_idle(0); }, "not idle");
  testing::expect_error_containing([&] { (void)pool.ref_count(2); }, "block 2 out of range [0, 2)");
  pool.allocate();
  pool.allocate();
  testing::expect_error_containing([&] { pool.allocate(); }, "no free block (2 used, 0 idle of 2)");
  testing::expect_error_containing([] { KvBlockPool(kSpec, 0, nullptr); }, "num_blocks");
}

TEST(KvBlockPool, ReleaseAndResumeReturnAndRetakeTheReservation) {
  MemoryTracker tracker;
  KvBlockPool pool(kSpec, 6, &tracker);
  EXPECT_EQ(tracker.current(kDevice), 6 * kBlockBytes);
  const int32_t used = pool.allocate();
  const int32_t idle = pool.allocate();
  pool.remove_ref(idle, OnLastRef::keep_idle);
  testing::expect_error_containing([&] { pool.release(); }, "1 blocks are still used and 1 idle");
  pool.remove_ref(used, OnLastRef::to_free_list);
  testing::expect_error_containing([&] { pool.release(); }, "0 blocks are still used and 1 idle");
  pool.free_idle(idle);
  pool.release();
  EXPECT_FALSE(pool.resident());
  EXPECT_EQ(pool.reserved_bytes(), 0);
  EXPECT_EQ(tracker.current(kDevice), 0);
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::workspace), 0);
  testing::expect_error_containing([&] { pool.allocate(); }, "released");
  testing::expect_error_containing([&] { (void)pool.keys(0); }, "released");
  testing::expect_error_containing([&] { pool.release(); }, "released");

  pool.resume();
  EXPECT_TRUE(pool.resident());
  EXPECT_EQ(tracker.current(kDevice), 6 * kBlockBytes);
  EXPECT_EQ(pool.num_free(), 6);
  EXPECT_EQ(pool.allocate(), 0);
  expect_accounting(tracker, pool);
  testing::expect_error_containing([&] { pool.resume(); }, "already resident");
}

TEST(KvBlockPool, DeviceBudgetIsCheckedBeforeAllocatingAndDestructionReturnsEverything) {
  MemoryTracker tracker;
  tracker.set_budget(kDevice, 5 * kBlockBytes);
  testing::expect_error_containing([&] { KvBlockPool(kSpec, 6, &tracker); }, "out of device memory");
  EXPECT_EQ(tracker.current(kDevice), 0);
  {
    KvBlockPool pool(kSpec, 5, &tracker);
    pool.allocate();
    pool.add_ref(0);
    expect_accounting(tracker, pool);
  }
  EXPECT_EQ(tracker.current(kDevice, MemoryCategory::kv_cache), 0);
  EXPECT_EQ(tracker.current(kDevice), 0);
}

}  // namespace
}  // namespace rf::engine::rollout
