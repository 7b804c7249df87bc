// engine/rollout/kv_block_manager.h: block tables, fork and copy-on-write (the n samples of a prompt),
// the tracker's kv_cache bytes with n = 8 (issue #7's acceptance), prefix caching across requests
// (hits, misses, the last token always recomputed, LRU eviction, no eviction of blocks in use), running
// out of blocks, release() / resume(), and the errors of bad calls.
#include "engine/rollout/kv_block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "support/test_support.h"

namespace rf::engine::rollout {
namespace {

constexpr MemoryTier kDevice = MemoryTier::device;
// 2 layers x 16 tokens x 1 kv head x head_dim 2 x 4 bytes x 2 = 512 bytes a block.
const KvCacheSpec kSpec{.num_layers = 2, .num_kv_heads = 1, .head_dim = 2, .block_size = 16, .dtype = DType::f32};
constexpr int64_t kBlockBytes = 512;
constexpr KvBlockManagerOptions kPrefixCaching{.enable_prefix_caching = true};

// Token ids first, first + 1, ...
std::vector<int64_t> iota_tokens(int64_t count, int64_t first) {
  std::vector<int64_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t kv_bytes(const MemoryTracker& tracker) { return tracker.current(kDevice, MemoryCategory::kv_cache); }

TEST(KvBlockManager, AllocateAppendFreeRoundTripLeavesThePoolEmpty) {
  MemoryTracker tracker;
  KvBlockManager manager(kSpec, 10, &tracker);
  EXPECT_EQ(manager.allocate_prompt(1, iota_tokens(20, 0)), 0);
  EXPECT_EQ(manager.allocate_prompt(2, iota_tokens(16, 100)), 0);
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{2}));
  EXPECT_EQ(manager.num_tokens(1), 20);
  EXPECT_EQ(manager.slot_mapping(1, 14, 18), (std::vector<int64_t>{14, 15, 16, 17}));
  EXPECT_EQ(manager.num_used_blocks(), 3);
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);

  // Sequence 2's block is full: its next token opens block 3 at offset 0.
  const KvAppend append = manager.append_slots(2, std::vector<int64_t>{7});
  EXPECT_TRUE(append.copies.empty());
  EXPECT_EQ(append.slot_mapping, (std::vector<int64_t>{3 * 16}));
  // A multi-token append fills sequence 1's block 1 (offsets 4..15) and spills into a new block.
  const KvAppend chunk = manager.append_slots(1, iota_tokens(14, 500));
  EXPECT_EQ(chunk.slot_mapping.front(), 16 + 4);
  EXPECT_EQ(chunk.slot_mapping[11], 16 + 15);
  EXPECT_EQ(chunk.slot_mapping[12], 4 * 16);
  EXPECT_EQ(chunk.slot_mapping.back(), 4 * 16 + 1);
  EXPECT_EQ(manager.num_tokens(1), 34);
  EXPECT_EQ(manager.num_used_blocks(), 5);

  manager.free(1);
  manager.free(2);
  EXPECT_EQ(manager.num_sequences(), 0);
  EXPECT_EQ(manager.num_used_blocks(), 0);
  EXPECT_EQ(manager.num_free_blocks(), 10);
  EXPECT_EQ(manager.pool().num_free(), 10);
  EXPECT_EQ(kv_bytes(tracker), 0);
  EXPECT_EQ(tracker.peak(kDevice, MemoryCategory::kv_cache), 5 * kBlockBytes);
}

TEST(KvBlockManager, ForkedSamplesShareThePromptAndCopyTheSharedPartialBlockOnTheirFirstWrite) {
  KvBlockManager manager(kSpec, 16, nullptr);
  ASSERT_EQ(manager.allocate_prompt(0, iota_tokens(37, 0)), 0);
  // The prefill writes the prompt's K: mark the third block's 5 tokens in layer 1.
  const std::vector<int64_t> prompt_slots = manager.slot_mapping(0, 32, 37);
  float* k1 = manager.pool().keys(1).data<float>();  // [blocks * 16, K=1, D=2] rows
  for (int64_t slot : prompt_slots) k1[slot * 2] = float(slot) + 0.5f;
  for (int64_t sample = 1; sample < 8; ++sample) manager.fork(0, sample);
  EXPECT_EQ(manager.num_used_blocks(), 3);
  for (int32_t block : {0, 1, 2}) EXPECT_EQ(manager.pool().ref_count(block), 8);

  std::vector<KvBlockCopy> copies;
  for (int64_t sample = 0; sample < 8; ++sample) {
    const KvAppend append = manager.append_slots(sample, std::vector<int64_t>{1000 + sample});
    copies.insert(copies.end(), append.copies.begin(), append.copies.end());
    const std::vector<int32_t>& table = manager.block_table(sample);
    ASSERT_EQ(table.size(), 3u);
    EXPECT_EQ(table[0], 0);  // full blocks stay shared
    EXPECT_EQ(table[1], 1);
    EXPECT_EQ(append.slot_mapping, (std::vector<int64_t>{table[2] * 16 + 5}));
    EXPECT_EQ(manager.pool().ref_count(table[2]), 1) << "a sample writes only into a block of its own";
  }
  // Samples 0..6 each copied the shared block 2 into a fresh block (3..9); sample 7 was its last holder
  // and wrote in place.
  std::vector<KvBlockCopy> expected;
  for (int32_t dst = 3; dst <= 9; ++dst) expected.push_back({2, dst});
  EXPECT_EQ(copies, expected);
  EXPECT_EQ(manager.block_table(7)[2], 2);
  // The copies were made on the storage: every sample sees the prompt's 5 tokens in its own block.
  for (int64_t sample = 0; sample < 8; ++sample) {
    const std::vector<int64_t> slots = manager.slot_mapping(sample, 32, 37);
    for (size_t i = 0; i < slots.size(); ++i) EXPECT_EQ(k1[slots[i] * 2], float(prompt_slots[i]) + 0.5f);
  }
  for (int32_t block : {0, 1}) EXPECT_EQ(manager.pool().ref_count(block), 8);
  EXPECT_EQ(manager.num_used_blocks(), 2 + 8);
}

// Issue #7 acceptance: with n = 8 the prompt's KV bytes are counted once.
TEST(KvBlockManager, WithEightSamplesThePromptsKvBytesAreCountedOnce) {
  MemoryTracker tracker;
  KvBlockManager manager(kSpec, 32, &tracker);
  manager.allocate_prompt(0, iota_tokens(37, 0));  // 3 blocks: 16 + 16 + 5 tokens
  for (int64_t sample = 1; sample < 8; ++sample) manager.fork(0, sample);
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);  // not 8 x 3
  EXPECT_EQ(tracker.current(kDevice), manager.pool().reserved_bytes());

  // Each sample decodes 12 tokens: positions 37..48. Its first write copies the partial block (7 of the
  // 8 samples; the last writes in place), position 48 opens a block per sample.
  for (int64_t step = 0; step < 12; ++step) {
    for (int64_t sample = 0; sample < 8; ++sample) manager.append_slots(sample, std::vector<int64_t>{step});
  }
  const int64_t shared_prompt_blocks = 2;   // the prompt's full blocks, counted once
  const int64_t per_sample_blocks = 8 * 2;  // each sample's own third and fourth block
  EXPECT_EQ(kv_bytes(tracker), (shared_prompt_blocks + per_sample_blocks) * kBlockBytes);
  EXPECT_EQ(manager.num_used_blocks(), shared_prompt_blocks + per_sample_blocks);

  for (int64_t sample = 0; sample < 7; ++sample) manager.free(sample);
  EXPECT_EQ(kv_bytes(tracker), 4 * kBlockBytes);  // sample 7 alone: 2 prompt blocks + 2 of its own
  manager.free(7);
  EXPECT_EQ(kv_bytes(tracker), 0);
}

TEST(KvBlockManager, PrefixCacheHitsAcrossRequestsWithTheSame40TokenPrefix) {
  MemoryTracker tracker;
  KvBlockManager manager(kSpec, 16, &tracker, kPrefixCaching);
  const std::vector<int64_t> prefix = iota_tokens(40, 0);
  EXPECT_EQ(manager.allocate_prompt(1, concat(prefix, {900, 901})), 0);
  manager.mark_computed(1, 42);
  // 40 shared tokens = 2 full blocks + 8: the full blocks are hits.
  EXPECT_EQ(manager.allocate_prompt(2, concat(prefix, {700})), 32);
  const std::vector<int32_t> a = manager.block_table(1);
  const std::vector<int32_t> b = manager.block_table(2);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[1]);
  EXPECT_NE(b[2], a[2]);  // the partial block is never shared across requests
  EXPECT_EQ(manager.pool().ref_count(a[0]), 2);
  EXPECT_EQ(kv_bytes(tracker), 4 * kBlockBytes);  // the hits count once
  EXPECT_EQ(manager.prefix_cache_queries(), 42 + 41);
  EXPECT_EQ(manager.prefix_cache_hits(), 32);

  // After both finish, their full blocks stay cached (idle) and a third request revives them.
  manager.free(1);
  manager.free(2);
  EXPECT_EQ(manager.num_used_blocks(), 0);
  EXPECT_EQ(manager.num_cached_blocks(), 2);
  EXPECT_EQ(manager.num_free_blocks(), 16);
  EXPECT_EQ(manager.allocate_prompt(3, concat(prefix, {5, 6, 7})), 32);
  EXPECT_EQ(manager.block_table(3)[0], a[0]);
  EXPECT_EQ(manager.block_table(3)[1], a[1]);
  EXPECT_EQ(manager.num_cached_blocks(), 0);
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);
  EXPECT_NE(manager.describe().find("prefix cache hits 64 of 126 tokens"), std::string::npos) << manager.describe();
}

TEST(KvBlockManager, PrefixCacheMissesOnAnyDifferentTokenAndHitsOnlyUpToIt) {
  KvBlockManager manager(kSpec, 16, nullptr, kPrefixCaching);
  const std::vector<int64_t> prompt = iota_tokens(40, 0);
  manager.allocate_prompt(1, prompt);
  manager.mark_computed(1, 40);
  std::vector<int64_t> first_block_differs = prompt;
  first_block_differs[3] = 999;
  EXPECT_EQ(manager.allocate_prompt(2, first_block_differs), 0);
  // Block 1's tokens equal but its prefix differs: the chain hash tells them apart.
  manager.mark_computed(2, 40);
  std::vector<int64_t> second_block_differs = prompt;
  second_block_differs[20] = 999;
  EXPECT_EQ(manager.allocate_prompt(3, second_block_differs), 16);
  EXPECT_EQ(manager.block_table(3)[0], manager.block_table(1)[0]);
  EXPECT_NE(manager.block_table(3)[1], manager.block_table(1)[1]);
  EXPECT_NE(manager.block_table(3)[1], manager.block_table(2)[1]);
  EXPECT_NE(kv_block_hash(kv_block_hash(kv_root_block_hash(), std::span(prompt).first(16)), std::span(prompt).subspan(16, 16)),
            kv_block_hash(kv_block_hash(kv_root_block_hash(), std::span(first_block_differs).first(16)),
                          std::span(first_block_differs).subspan(16, 16)));
}

TEST(KvBlockManager, TheLastPromptTokenIsAlwaysRecomputed) {
  KvBlockManager manager(kSpec, 16, nullptr, kPrefixCaching);
  const std::vector<int64_t> prompt = iota_tokens(32, 0);  // exactly 2 blocks
  manager.allocate_prompt(1, prompt);
  manager.mark_computed(1, 32);
  EXPECT_EQ(manager.allocate_prompt(2, prompt), 16);  // not 32: block 1 holds the last token
  EXPECT_NE(manager.block_table(2)[1], manager.block_table(1)[1]);
  EXPECT_EQ(manager.allocate_prompt(3, concat(prompt, {77})), 32);
}

TEST(KvBlockManager, BlocksBecomeCacheableOnlyOnceComputed) {
  KvBlockManager manager(kSpec, 16, nullptr, kPrefixCaching);
  const std::vector<int64_t> prompt = iota_tokens(20, 0);
  manager.allocate_prompt(1, prompt);
  EXPECT_EQ(manager.allocate_prompt(2, prompt), 0) << "sequence 1's KV is not written yet";
  manager.mark_computed(1, 15);
  EXPECT_EQ(manager.allocate_prompt(3, prompt), 0) << "block 0 is not fully computed";
  // An append means every earlier token is computed.
  manager.append_slots(1, std::vector<int64_t>{20});
  EXPECT_EQ(manager.allocate_prompt(4, prompt), 16);

  // Blocks filled during decode: 10-token prompt, 6 decoded tokens fill block 0.
  const std::vector<int64_t> short_prompt = iota_tokens(10, 300);
  manager.allocate_prompt(5, short_prompt);
  std::vector<int64_t> generated;
  for (int64_t t = 0; t < 6; ++t) {
    manager.append_slots(5, std::vector<int64_t>{400 + t});
    generated.push_back(400 + t);
  }
  const std::vector<int64_t> continued = concat(concat(short_prompt, generated), {1});
  EXPECT_EQ(manager.allocate_prompt(6, continued), 0) << "the 16th token's KV is not written yet";
  manager.mark_computed(5, 16);
  EXPECT_EQ(manager.allocate_prompt(7, continued), 16);
  EXPECT_EQ(manager.block_table(7)[0], manager.block_table(5)[0]);
}

TEST(KvBlockManager, IdleCachedBlocksAreEvictedLeastRecentlyFreedFirstTailFirst) {
  KvBlockManager manager(kSpec, 5, nullptr, kPrefixCaching);
  const std::vector<int64_t> a = iota_tokens(32, 0);
  const std::vector<int64_t> b = iota_tokens(32, 100);
  manager.allocate_prompt(1, a);  // blocks 0, 1
  manager.allocate_prompt(2, b);  // blocks 2, 3
  manager.mark_computed(1, 32);
  manager.mark_computed(2, 32);
  manager.free(1);
  manager.free(2);
  EXPECT_EQ(manager.num_cached_blocks(), 4);
  // The free list goes first: no eviction while block 4 is free.
  manager.allocate_prompt(3, iota_tokens(16, 500));
  EXPECT_EQ(manager.block_table(3), (std::vector<int32_t>{4}));
  EXPECT_EQ(manager.num_cached_blocks(), 4);
  // Then the least recently freed: a's tail (block 1).
  manager.allocate_prompt(4, iota_tokens(3, 600));
  EXPECT_EQ(manager.block_table(4), (std::vector<int32_t>{1}));
  // a's head still hits, its tail does not; the two fresh blocks evict b's tail, then b's head.
  EXPECT_EQ(manager.allocate_prompt(5, concat(a, {1})), 16);
  EXPECT_EQ(manager.block_table(5), (std::vector<int32_t>{0, 3, 2}));
  EXPECT_EQ(manager.num_cached_blocks(), 0);
  manager.free(3);
  manager.free(4);
  manager.free(5);
  EXPECT_EQ(manager.allocate_prompt(6, concat(b, {1})), 0) << "b's blocks were evicted";
}

TEST(KvBlockManager, BlocksInUseAreNeverEvictedAndRunningOutIsReported) {
  MemoryTracker tracker;
  KvBlockManager manager(kSpec, 3, &tracker, kPrefixCaching);
  const std::vector<int64_t> a = iota_tokens(32, 0);
  manager.allocate_prompt(1, a);
  manager.mark_computed(1, 32);  // cached, and in use
  const std::vector<int64_t> other = iota_tokens(20, 100);
  EXPECT_FALSE(manager.can_allocate(other));
  testing::expect_error_containing([&] { manager.allocate_prompt(2, other); }, "must check can_allocate first");
  EXPECT_FALSE(manager.contains(2));
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(manager.pool().ref_count(0), 1);
  EXPECT_EQ(manager.num_free_blocks(), 1);
  // A hit needs fewer fresh blocks: a's prefix plus 5 tokens fits in the one free block.
  EXPECT_TRUE(manager.can_allocate(concat(a, {1, 2, 3, 4, 5})));

  // Decode until the cache is full, then can_append says no and append_slots refuses.
  manager.append_slots(1, iota_tokens(16, 50));  // fills block 2
  EXPECT_EQ(manager.num_free_blocks(), 0);
  EXPECT_FALSE(manager.can_append(1, 1));
  EXPECT_TRUE(manager.can_append(1, 0));
  testing::expect_error_containing([&] { manager.append_slots(1, std::vector<int64_t>{1}); },
                                   "must check can_append first");
  EXPECT_EQ(manager.num_tokens(1), 48);
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);
  // The scheduler preempts: everything is reclaimable again.
  manager.free(1);
  EXPECT_EQ(manager.num_free_blocks(), 3);
  EXPECT_TRUE(manager.can_allocate(other));
}

TEST(KvBlockManager, CopyOnWriteNeedsAFreeBlock) {
  KvBlockManager manager(kSpec, 3, nullptr);
  manager.allocate_prompt(1, iota_tokens(37, 0));  // all 3 blocks
  manager.fork(1, 2);
  EXPECT_FALSE(manager.can_append(2, 1)) << "the shared partial block must be copied, and no block is free";
  manager.free(1);
  EXPECT_TRUE(manager.can_append(2, 1));  // now the sole holder writes in place
  EXPECT_TRUE(manager.append_slots(2, std::vector<int64_t>{1}).copies.empty());
}

TEST(KvBlockManager, ReleaseAndResumeTakeTheTrackerToZeroAndBack) {
  MemoryTracker tracker;
  KvBlockManager manager(kSpec, 8, &tracker, kPrefixCaching);
  EXPECT_EQ(tracker.current(kDevice), 8 * kBlockBytes);
  const std::vector<int64_t> prompt = iota_tokens(40, 0);
  manager.allocate_prompt(1, prompt);
  manager.mark_computed(1, 40);
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);
  testing::expect_error_containing([&] { manager.release(); }, "1 sequences still hold KV blocks");
  manager.free(1);
  EXPECT_EQ(manager.num_cached_blocks(), 2);
  manager.release();  // drops the prefix cache too
  EXPECT_EQ(tracker.current(kDevice), 0);
  EXPECT_EQ(manager.pool().reserved_bytes(), 0);
  EXPECT_FALSE(manager.can_allocate(prompt));
  testing::expect_error_containing([&] { manager.allocate_prompt(2, prompt); }, "released; resume() it first");
  EXPECT_NE(manager.describe().find("released"), std::string::npos);

  manager.resume();
  EXPECT_EQ(tracker.current(kDevice), 8 * kBlockBytes);
  EXPECT_EQ(kv_bytes(tracker), 0);
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_EQ(manager.num_cached_blocks(), 0);
  EXPECT_EQ(manager.allocate_prompt(2, prompt), 0) << "the cache's content did not survive release()";
  EXPECT_EQ(kv_bytes(tracker), 3 * kBlockBytes);
}

TEST(KvBlockManager, BadCallsAreErrorsThatSayWhat) {
  KvBlockManager manager(kSpec, 8, nullptr);
  manager.allocate_prompt(1, iota_tokens(5, 0));
  testing::expect_error_containing([&] { manager.free(42); }, "free: unknown sequence 42 (never allocated, or already freed)");
  manager.free(1);
  testing::expect_error_containing([&] { manager.free(1); }, "free: unknown sequence 1");
  testing::expect_error_containing([&] { manager.append_slots(7, std::vector<int64_t>{1}); },
                                   "append_slots: unknown sequence 7");
  testing::expect_error_containing([&] { manager.fork(7, 8); }, "fork: unknown sequence 7");
  testing::expect_error_containing([&] { (void)manager.block_table(7); }, "block_table: unknown sequence 7");
  testing::expect_error_containing([&] { (void)manager.num_tokens(7); }, "num_tokens: unknown sequence 7");
  testing::expect_error_containing([&] { (void)manager.can_append(7, 1); }, "can_append: unknown sequence 7");
  testing::expect_error_containing([&] { manager.mark_computed(7, 0); }, "mark_computed: unknown sequence 7");

  manager.allocate_prompt(2, iota_tokens(5, 0));
  testing::expect_error_containing([&] { manager.allocate_prompt(2, iota_tokens(5, 0)); }, "sequence 2 already exists");
  testing::expect_error_containing([&] { manager.fork(2, 2); }, "child sequence 2 already exists");
  testing::expect_error_containing([&] { manager.allocate_prompt(3, {}); }, "empty prompt");
  testing::expect_error_containing([&] { manager.allocate_prompt(3, std::vector<int64_t>{1, -4}); },
                                   "token 1 has id -4");
  testing::expect_error_containing([&] { manager.append_slots(2, {}); }, "no new tokens");
  testing::expect_error_containing([&] { manager.mark_computed(2, 6); }, "6 computed tokens, but sequence 2 has 5");
  testing::expect_error_containing([&] { (void)manager.slot_mapping(2, 3, 6); }, "tokens [3, 6) of sequence 2");
  EXPECT_EQ(manager.num_sequences(), 1);
  EXPECT_EQ(manager.num_used_blocks(), 1);
}

TEST(KvBlockManager, DescribeSaysWhatIsHeld) {
  KvBlockManager manager(kSpec, 4, nullptr);
  manager.allocate_prompt(1, iota_tokens(20, 0));
  EXPECT_EQ(manager.describe(), "KV cache: 4 blocks x 16 tokens (512 B each, 2.0 KiB): 2 used, 2 free, 0 cached; 1 sequences");
}

}  // namespace
}  // namespace rf::engine::rollout
