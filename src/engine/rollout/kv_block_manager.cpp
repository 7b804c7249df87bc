#include "engine/rollout/kv_block_manager.h"

#include <algorithm>

#include "core/error.h"

namespace rf::engine::rollout {
namespace {

// wyhash's mixing step: the 128-bit product of a and b, folded to 64 bits.
uint64_t mum(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return uint64_t(product) ^ uint64_t(product >> 64);
}

// One 64-bit lane: every pair of tokens is folded into the state by one mum. `token_secret` has its top
// bit set, so a (non-negative) token never cancels it and zeroes the state, which would drop the parent.
uint64_t hash_lane(uint64_t parent, std::span<const int64_t> tokens, uint64_t seed, uint64_t token_secret) {
  uint64_t h = mum(parent ^ seed, token_secret);
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) h = mum(uint64_t(tokens[i]) ^ token_secret, uint64_t(tokens[i + 1]) ^ h);
  if (i < tokens.size()) h = mum(uint64_t(tokens[i]) ^ token_secret, h ^ seed);
  return mum(h ^ seed, uint64_t(tokens.size()) ^ token_secret);
}

void check_token_ids(std::span<const int64_t> tokens, const char* what) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    RF_CHECK(tokens[i] >= 0, "KvBlockManager::{}: token {} has id {}; ids must be non-negative", what, i, tokens[i]);
  }
}

}  // namespace

KvBlockHash kv_block_hash(const KvBlockHash& parent, std::span<const int64_t> tokens) {
  return {hash_lane(parent.lo, tokens, 0x8ebc6af09c88c6e3ull, 0xa0761d6478bd642full),
          hash_lane(parent.hi, tokens, 0x589965cc75374cc3ull, 0xe7037ed1a0b428dbull)};
}

KvBlockHash kv_root_block_hash() { return {0x1d8e4e27c47d124full, 0x9e3779b97f4a7c15ull}; }

KvBlockManager::KvBlockManager(const KvCacheSpec& spec, int64_t num_blocks, MemoryTracker* tracker,
                               KvBlockManagerOptions options)
    : pool_(spec, num_blocks, tracker), options_(options), entries_(size_t(num_blocks)) {}

KvBlockManager::Sequence& KvBlockManager::sequence(int64_t seq, const char* what) {
  auto it = sequences_.find(seq);
  RF_CHECK(it != sequences_.end(), "KvBlockManager::{}: unknown sequence {} (never allocated, or already freed)",
           what, seq);
  return it->second;
}

const KvBlockManager::Sequence& KvBlockManager::sequence(int64_t seq, const char* what) const {
  return const_cast<KvBlockManager*>(this)->sequence(seq, what);
}

std::vector<int32_t> KvBlockManager::match_prefix(std::span<const int64_t> prompt,
                                                  std::vector<KvBlockHash>* chain) const {
  std::vector<int32_t> hits;
  if (!options_.enable_prefix_caching) return hits;
  const auto block_size = size_t(pool_.spec().block_size);
  const size_t max_hits = (prompt.size() - 1) / block_size;  // the last token is always recomputed
  KvBlockHash parent = kv_root_block_hash();
  for (size_t i = 0; i < max_hits; ++i) {
    const auto tokens = prompt.subspan(i * block_size, block_size);
    const KvBlockHash hash = kv_block_hash(parent, tokens);
    const auto it = cache_.find(hash.lo);
    if (it == cache_.end()) break;
    const CacheEntry& entry = entries_[size_t(it->second)];
    if (!(entry.hash == hash && std::equal(tokens.begin(), tokens.end(), entry.tokens.begin()))) break;
    hits.push_back(it->second);
    chain->push_back(hash);
    parent = hash;
  }
  return hits;
}

bool KvBlockManager::can_allocate(std::span<const int64_t> prompt) const {
  RF_CHECK(!prompt.empty(), "KvBlockManager::can_allocate: empty prompt");
  if (!pool_.resident()) return false;
  std::vector<KvBlockHash> chain;
  const std::vector<int32_t> hits = match_prefix(prompt, &chain);
  // Idle hits are taken out of the evictable set, so they count once: as hits, not as room.
  const auto idle_hits = std::count_if(hits.begin(), hits.end(),
                                       [&](int32_t b) { return pool_.state(b) == KvBlockState::idle; });
  const int64_t needed = pool_.spec().blocks_for_tokens(int64_t(prompt.size())) - int64_t(hits.size());
  return needed <= num_free_blocks() - idle_hits;
}

int64_t KvBlockManager::allocate_prompt(int64_t seq, std::span<const int64_t> prompt) {
  RF_CHECK(pool_.resident(), "KvBlockManager::allocate_prompt: the KV cache is released; resume() it first");
  RF_CHECK(!contains(seq), "KvBlockManager::allocate_prompt: sequence {} already exists", seq);
  RF_CHECK(!prompt.empty(), "KvBlockManager::allocate_prompt: sequence {} has an empty prompt", seq);
  check_token_ids(prompt, "allocate_prompt");
  RF_CHECK(can_allocate(prompt),
           "KvBlockManager::allocate_prompt: no room for sequence {}'s {} prompt tokens ({} free blocks); the "
           "scheduler must check can_allocate first",
           seq, prompt.size(), num_free_blocks());
  Sequence s;
  const std::vector<int32_t> hits = match_prefix(prompt, &s.chain);
  s.tokens.assign(prompt.begin(), prompt.end());
  // Revive the hits before taking fresh blocks, so that no eviction can pick one of them.
  for (int32_t block : hits) {
    if (pool_.state(block) == KvBlockState::idle) lru_.erase(entries_[size_t(block)].lru_position);
    pool_.add_ref(block);
    s.block_table.push_back(block);
  }
  const int64_t num_prompt_blocks = pool_.spec().blocks_for_tokens(int64_t(prompt.size()));
  while (int64_t(s.block_table.size()) < num_prompt_blocks) s.block_table.push_back(take_block());
  const int64_t num_computed = int64_t(hits.size()) * pool_.spec().block_size;
  if (options_.enable_prefix_caching) {
    prefix_cache_queries_ += int64_t(prompt.size());
    prefix_cache_hits_ += num_computed;
  }
  sequences_.emplace(seq, std::move(s));
  return num_computed;
}

void KvBlockManager::fork(int64_t parent, int64_t child) {
  RF_CHECK(!contains(child), "KvBlockManager::fork: child sequence {} already exists", child);
  const Sequence& p = sequence(parent, "fork");
  for (int32_t block : p.block_table) pool_.add_ref(block);
  Sequence c = p;
  sequences_.emplace(child, std::move(c));
}

int64_t KvBlockManager::blocks_needed_to_append(const Sequence& s, int64_t num_new_tokens) const {
  const auto num_old = int64_t(s.tokens.size());
  int64_t needed = pool_.spec().blocks_for_tokens(num_old + num_new_tokens) - int64_t(s.block_table.size());
  const bool last_partial = num_old % pool_.spec().block_size != 0;
  if (num_new_tokens > 0 && last_partial && pool_.ref_count(s.block_table.back()) > 1) ++needed;  // the copy
  return needed;
}

bool KvBlockManager::can_append(int64_t seq, int64_t num_new_tokens) const {
  const Sequence& s = sequence(seq, "can_append");
  RF_CHECK(num_new_tokens >= 0, "KvBlockManager::can_append: {} new tokens", num_new_tokens);
  return pool_.resident() && blocks_needed_to_append(s, num_new_tokens) <= num_free_blocks();
}

KvAppend KvBlockManager::append_slots(int64_t seq, std::span<const int64_t> new_tokens) {
  Sequence& s = sequence(seq, "append_slots");
  RF_CHECK(!new_tokens.empty(), "KvBlockManager::append_slots: no new tokens for sequence {}", seq);
  check_token_ids(new_tokens, "append_slots");
  RF_CHECK(can_append(seq, int64_t(new_tokens.size())),
           "KvBlockManager::append_slots: no room for {} more tokens of sequence {} ({} free blocks); the "
           "scheduler must check can_append first",
           new_tokens.size(), seq, num_free_blocks());
  cache_computed_blocks(s, int64_t(s.tokens.size()));
  const int64_t block_size = pool_.spec().block_size;
  KvAppend out;
  const auto num_old = int64_t(s.tokens.size());
  if (num_old % block_size != 0 && pool_.ref_count(s.block_table.back()) > 1) {
    const int32_t shared = s.block_table.back();
    const int32_t own = take_block();
    pool_.copy_block(shared, own);
    pool_.remove_ref(shared, OnLastRef::to_free_list);  // still held by the other sharers
    s.block_table.back() = own;
    out.copies.push_back({shared, own});
  }
  out.slot_mapping.reserve(new_tokens.size());
  for (int64_t token : new_tokens) {
    const auto position = int64_t(s.tokens.size());
    if (position % block_size == 0) s.block_table.push_back(take_block());
    s.tokens.push_back(token);
    out.slot_mapping.push_back(slot_of(s, position));
  }
  return out;
}

void KvBlockManager::mark_computed(int64_t seq, int64_t num_computed_tokens) {
  Sequence& s = sequence(seq, "mark_computed");
  RF_CHECK(num_computed_tokens >= 0 && num_computed_tokens <= int64_t(s.tokens.size()),
           "KvBlockManager::mark_computed: {} computed tokens, but sequence {} has {}", num_computed_tokens, seq,
           s.tokens.size());
  cache_computed_blocks(s, num_computed_tokens);
}

void KvBlockManager::cache_computed_blocks(Sequence& s, int64_t num_computed) {
  if (!options_.enable_prefix_caching) return;
  const auto block_size = size_t(pool_.spec().block_size);
  const auto num_full = size_t(num_computed) / block_size;
  for (size_t i = s.chain.size(); i < num_full; ++i) {
    const auto tokens = std::span<const int64_t>(s.tokens).subspan(i * block_size, block_size);
    const KvBlockHash hash = kv_block_hash(i == 0 ? kv_root_block_hash() : s.chain[i - 1], tokens);
    const int32_t block = s.block_table[i];
    CacheEntry& entry = entries_[size_t(block)];
    // An existing entry under this hash holds the same content (another sequence computed it too, or it
    // is this very block, shared by fork or hit): keep it. The chain still extends through this block.
    if (!entry.cached && cache_.find(hash.lo) == cache_.end()) {
      entry.cached = true;
      entry.hash = hash;
      entry.tokens.assign(tokens.begin(), tokens.end());
      cache_.emplace(hash.lo, block);
    }
    s.chain.push_back(hash);
  }
}

int32_t KvBlockManager::take_block() {
  if (pool_.num_free() == 0) {
    RF_CHECK(!lru_.empty(), "KvBlockManager: no free or evictable block");
    const int32_t victim = lru_.front();
    uncache(victim);
    pool_.free_idle(victim);
  }
  return pool_.allocate();
}

void KvBlockManager::uncache(int32_t block) {
  CacheEntry& entry = entries_[size_t(block)];
  cache_.erase(entry.hash.lo);
  if (pool_.state(block) == KvBlockState::idle) lru_.erase(entry.lru_position);
  entry = CacheEntry{};
}

void KvBlockManager::free(int64_t seq) {
  Sequence& s = sequence(seq, "free");
  // Tail first: of one sequence's idle blocks, the tail is evicted before the head, which other prompts
  // are likelier to share.
  for (auto it = s.block_table.rbegin(); it != s.block_table.rend(); ++it) {
    CacheEntry& entry = entries_[size_t(*it)];
    if (!entry.cached) {
      pool_.remove_ref(*it, OnLastRef::to_free_list);
    } else if (pool_.remove_ref(*it, OnLastRef::keep_idle) == 0) {
      entry.lru_position = lru_.insert(lru_.end(), *it);
    }
  }
  sequences_.erase(seq);
}

const std::vector<int32_t>& KvBlockManager::block_table(int64_t seq) const {
  return sequence(seq, "block_table").block_table;
}

int64_t KvBlockManager::num_tokens(int64_t seq) const { return int64_t(sequence(seq, "num_tokens").tokens.size()); }

int64_t KvBlockManager::slot_of(const Sequence& s, int64_t position) const {
  const int64_t block_size = pool_.spec().block_size;
  return int64_t(s.block_table[size_t(position / block_size)]) * block_size + position % block_size;
}

std::vector<int64_t> KvBlockManager::slot_mapping(int64_t seq, int64_t begin, int64_t end) const {
  const Sequence& s = sequence(seq, "slot_mapping");
  RF_CHECK(0 <= begin && begin <= end && end <= int64_t(s.tokens.size()),
           "KvBlockManager::slot_mapping: tokens [{}, {}) of sequence {}, which has {}", begin, end, seq,
           s.tokens.size());
  std::vector<int64_t> slots;
  slots.reserve(size_t(end - begin));
  for (int64_t position = begin; position < end; ++position) slots.push_back(slot_of(s, position));
  return slots;
}

std::string KvBlockManager::describe() const {
  std::string out = fmt::format(
      "KV cache: {} blocks x {} tokens ({} each, {}{}): {} used, {} free, {} cached; {} sequences", num_blocks(),
      pool_.spec().block_size, format_bytes(pool_.bytes_per_block()), format_bytes(pool_.reserved_bytes()),
      pool_.resident() ? "" : ", released", num_used_blocks(), pool_.num_free(), num_cached_blocks(),
      num_sequences());
  if (options_.enable_prefix_caching) {
    const double rate = prefix_cache_queries_ > 0 ? 100.0 * double(prefix_cache_hits_) / double(prefix_cache_queries_)
                                                  : 0.0;
    out += fmt::format("; prefix cache hits {} of {} tokens ({:.1f}%)", prefix_cache_hits_, prefix_cache_queries_,
                       rate);
  }
  return out;
}

void KvBlockManager::release() {
  RF_CHECK(sequences_.empty(), "KvBlockManager::release: {} sequences still hold KV blocks; free them first",
           sequences_.size());
  while (!lru_.empty()) {
    const int32_t block = lru_.front();
    uncache(block);
    pool_.free_idle(block);
  }
  pool_.release();
}

void KvBlockManager::resume() { pool_.resume(); }

}  // namespace rf::engine::rollout
