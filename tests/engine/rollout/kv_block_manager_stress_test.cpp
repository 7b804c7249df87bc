// engine/rollout/kv_block_manager.h under thousands of random allocate / fork / append / free /
// release-resume operations, driven like an engine would drive it: every slot handed out is written
// with a value that depends only on the token prefix, so any wrong sharing, missed copy-on-write, bad
// prefix hit or eviction of a block in use shows up as a wrong value. After every operation the
// invariants are checked against a model built from the live sequences: each block is free, idle
// (cached, evictable) or used with a ref count equal to the number of block tables holding it; a shared
// block sits at the same index in every table; the tracker's kv_cache bytes equal the used blocks.
#include "engine/rollout/kv_block_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace rf::engine::rollout {
namespace {

constexpr MemoryTier kDevice = MemoryTier::device;

// What the "model" writes as K (and, offset, as V) for the token at `position`: a function of the
// prefix tokens[0..position] and the layer, kept below 2^24 so that f32 holds it exactly.
std::vector<uint32_t> prefix_values(const std::vector<int64_t>& tokens) {
  std::vector<uint32_t> values;
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t token : tokens) {
    h = (h ^ uint64_t(token)) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    values.push_back(uint32_t(h & 0xffffffu));
  }
  return values;
}

float key_value(uint32_t value, int64_t layer) { return float((value + uint32_t(layer) * 7919u) & 0xffffffu); }
float value_value(uint32_t value, int64_t layer) { return float((value ^ 0x5a5a5au) + uint32_t(layer)); }

struct Harness {
  KvCacheSpec spec;
  MemoryTracker tracker;
  KvBlockManager manager;
  std::mt19937_64 rng;
  std::map<int64_t, std::vector<int64_t>> tokens;  // the model: each live sequence's tokens
  int64_t next_id = 0;
  int64_t prefix_hits = 0;
  int64_t num_copies = 0;
  int64_t num_preemptions = 0;

  Harness(const KvCacheSpec& s, int64_t num_blocks, KvBlockManagerOptions options, uint64_t seed)
      : spec(s), manager(s, num_blocks, &tracker, options), rng(seed) {}

  int64_t uniform(int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(rng); }

  // Writes the KV of tokens [begin, end) of `seq` at their slots, as the model's forward would.
  void write_kv(int64_t seq, int64_t begin, int64_t end) {
    const std::vector<uint32_t> values = prefix_values(tokens[seq]);
    const std::vector<int64_t> slots = manager.slot_mapping(seq, begin, end);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t slot = slots[size_t(p - begin)];
      ASSERT_EQ(manager.pool().ref_count(int32_t(slot / spec.block_size)), 1)
          << "sequence " << seq << " writes position " << p << " into a shared block";
      for (int64_t layer = 0; layer < spec.num_layers; ++layer) {
        manager.pool().keys(layer).data<float>()[slot] = key_value(values[size_t(p)], layer);
        manager.pool().values(layer).data<float>()[slot] = value_value(values[size_t(p)], layer);
      }
    }
  }

  // Every computed position of `seq` holds the value of its prefix.
  void expect_kv(int64_t seq, int64_t end) {
    const std::vector<uint32_t> values = prefix_values(tokens[seq]);
    const std::vector<int64_t> slots = manager.slot_mapping(seq, 0, end);
    for (int64_t p = 0; p < end; ++p) {
      for (int64_t layer = 0; layer < spec.num_layers; ++layer) {
        ASSERT_EQ(manager.pool().keys(layer).data<float>()[slots[size_t(p)]], key_value(values[size_t(p)], layer))
            << "sequence " << seq << " position " << p << " layer " << layer;
        ASSERT_EQ(manager.pool().values(layer).data<float>()[slots[size_t(p)]], value_value(values[size_t(p)], layer))
            << "sequence " << seq << " position " << p << " layer " << layer;
      }
    }
  }

  // Prompts drawn around a few shared stems, so that prefix hits happen.
  std::vector<int64_t> random_prompt() {
    std::vector<int64_t> prompt;
    const int64_t stem = uniform(0, 3);
    const int64_t stem_length = stem == 3 ? 0 : uniform(0, 3 * spec.block_size);
    for (int64_t i = 0; i < stem_length; ++i) prompt.push_back(stem * 1000 + i);
    const int64_t tail = uniform(1, 2 * spec.block_size);
    for (int64_t i = 0; i < tail; ++i) prompt.push_back(uniform(0, 3));
    return prompt;
  }

  void allocate() {
    const std::vector<int64_t> prompt = random_prompt();
    const int64_t seq = next_id++;
    if (!manager.can_allocate(prompt)) {
      const int64_t free_before = manager.num_free_blocks();
      EXPECT_THROW(manager.allocate_prompt(seq, prompt), Error);
      EXPECT_EQ(manager.num_free_blocks(), free_before);
      EXPECT_FALSE(manager.contains(seq));
      return;
    }
    const int64_t computed = manager.allocate_prompt(seq, prompt);
    ASSERT_EQ(computed % spec.block_size, 0);
    ASSERT_LT(computed, int64_t(prompt.size()));
    if (!manager.options().enable_prefix_caching) {
      ASSERT_EQ(computed, 0);
    }
    prefix_hits += computed;
    tokens[seq] = prompt;
    expect_kv(seq, computed);  // the hits hold exactly this prefix's KV
    write_kv(seq, computed, int64_t(prompt.size()));
    if (uniform(0, 3) > 0) manager.mark_computed(seq, int64_t(prompt.size()));
  }

  int64_t random_live() {
    auto it = tokens.begin();
    std::advance(it, uniform(0, int64_t(tokens.size()) - 1));
    return it->first;
  }

  void fork() {
    const int64_t parent = random_live();
    const int64_t child = next_id++;
    manager.fork(parent, child);
    tokens[child] = tokens[parent];
  }

  void append() {
    const int64_t seq = random_live();
    const int64_t count = uniform(0, 4) == 0 ? uniform(2, 2 * spec.block_size) : 1;
    if (!manager.can_append(seq, count)) {
      EXPECT_THROW(manager.append_slots(seq, std::vector<int64_t>(size_t(count), 1)), Error);
      free(seq);  // preempted
      ++num_preemptions;
      return;
    }
    std::vector<int64_t> new_tokens;
    for (int64_t i = 0; i < count; ++i) new_tokens.push_back(uniform(0, 3));
    const auto old_size = int64_t(tokens[seq].size());
    const KvAppend append = manager.append_slots(seq, new_tokens);
    ASSERT_LE(append.copies.size(), 1u);
    num_copies += int64_t(append.copies.size());
    ASSERT_EQ(int64_t(append.slot_mapping.size()), count);
    tokens[seq].insert(tokens[seq].end(), new_tokens.begin(), new_tokens.end());
    expect_kv(seq, old_size);  // copy-on-write kept the written prefix
    write_kv(seq, old_size, old_size + count);
    ASSERT_EQ(manager.slot_mapping(seq, old_size, old_size + count), append.slot_mapping);
  }

  void free(int64_t seq) {
    if (uniform(0, 1) == 0) manager.mark_computed(seq, int64_t(tokens[seq].size()));
    manager.free(seq);
    tokens.erase(seq);
  }

  void release_and_resume() {
    while (!tokens.empty()) free(tokens.begin()->first);
    manager.release();
    EXPECT_EQ(tracker.current(kDevice), 0);
    manager.resume();
    EXPECT_EQ(tracker.current(kDevice), manager.pool().reserved_bytes());
  }

  void check_invariants() {
    const KvBlockPool& pool = manager.pool();
    std::vector<int32_t> expected_refs(size_t(pool.num_blocks()), 0);
    std::vector<int64_t> index_in_table(size_t(pool.num_blocks()), -1);
    ASSERT_EQ(manager.num_sequences(), int64_t(tokens.size()));
    for (const auto& [seq, seq_tokens] : tokens) {
      const std::vector<int32_t>& table = manager.block_table(seq);
      ASSERT_EQ(manager.num_tokens(seq), int64_t(seq_tokens.size()));
      ASSERT_EQ(int64_t(table.size()), spec.blocks_for_tokens(int64_t(seq_tokens.size())));
      for (size_t i = 0; i < table.size(); ++i) {
        ++expected_refs[size_t(table[i])];
        if (index_in_table[size_t(table[i])] < 0) index_in_table[size_t(table[i])] = int64_t(i);
        ASSERT_EQ(index_in_table[size_t(table[i])], int64_t(i)) << "block " << table[i] << " at two positions";
      }
    }
    int64_t num_used = 0;
    for (int32_t b = 0; b < pool.num_blocks(); ++b) {
      const KvBlockState state = pool.state(b);
      if (expected_refs[size_t(b)] > 0) {
        ASSERT_EQ(state, KvBlockState::used) << "block " << b;
        ASSERT_EQ(pool.ref_count(b), expected_refs[size_t(b)]) << "block " << b;
        ++num_used;
      } else {
        ASSERT_NE(state, KvBlockState::used) << "block " << b << " is used by no sequence (a leak)";
        ASSERT_EQ(pool.ref_count(b), 0);
        if (!manager.options().enable_prefix_caching) {
          ASSERT_EQ(state, KvBlockState::free);
        }
      }
    }
    ASSERT_EQ(manager.num_used_blocks(), num_used);
    ASSERT_EQ(pool.num_used() + pool.num_idle() + pool.num_free(), pool.num_blocks());
    ASSERT_EQ(manager.num_free_blocks() + num_used, pool.num_blocks());
    ASSERT_EQ(tracker.current(kDevice, MemoryCategory::kv_cache), num_used * pool.bytes_per_block());
    ASSERT_EQ(tracker.current(kDevice), pool.reserved_bytes());
  }
};

class KvBlockManagerStress : public ::testing::TestWithParam<std::tuple<bool, uint64_t>> {};

TEST_P(KvBlockManagerStress, RandomOperationsKeepTheInvariantsAndTheKv) {
  const auto [prefix_caching, seed] = GetParam();
  const KvCacheSpec spec{.num_layers = 2, .num_kv_heads = 1, .head_dim = 1, .block_size = 4, .dtype = DType::f32};
  Harness h(spec, 48, {.enable_prefix_caching = prefix_caching}, seed);
  for (int op = 0; op < 4000; ++op) {
    const int64_t pick = h.uniform(0, 99);
    if (h.tokens.empty() || pick < 20) {
      h.allocate();
    } else if (pick < 30) {
      h.fork();
    } else if (pick < 85) {
      h.append();
    } else if (pick < 99) {
      h.free(h.random_live());
    } else {
      h.release_and_resume();
    }
    if (::testing::Test::HasFatalFailure()) FAIL() << "after operation " << op << ": " << h.manager.describe();
    h.check_invariants();
    if (::testing::Test::HasFatalFailure()) FAIL() << "after operation " << op << ": " << h.manager.describe();
  }
  while (!h.tokens.empty()) h.free(h.tokens.begin()->first);
  h.check_invariants();
  EXPECT_EQ(h.manager.num_used_blocks(), 0);
  EXPECT_EQ(h.manager.num_free_blocks(), 48);
  EXPECT_EQ(h.tracker.current(kDevice, MemoryCategory::kv_cache), 0);
  EXPECT_GT(h.num_copies, 0);
  EXPECT_GT(h.num_preemptions, 0);
  // The run must have exercised what it claims to.
  if (prefix_caching) {
    EXPECT_GT(h.prefix_hits, 0);
    EXPECT_EQ(h.manager.prefix_cache_hits(), h.prefix_hits);
  }
  h.manager.release();
  EXPECT_EQ(h.tracker.current(kDevice), 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvBlockManagerStress,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(uint64_t{1}, uint64_t{2}, uint64_t{3})));

}  // namespace
}  // namespace rf::engine::rollout
