// KvBlockManager: the rollout engine's block tables over a KvBlockPool, vLLM's block manager
// (v0 BlockSpaceManager, v1 KVCacheManager with prefix caching). Pure bookkeeping plus the
// copy-on-write block copies; no model code and no attention. Not thread-safe: the scheduler drives it.
//
// A sequence (an integer id chosen by the engine) has a block table (block ids in token order; token
// t is at slot block_table[t / block_size] * block_size + t % block_size) and the ids of its tokens.
//
// Sharing and copy-on-write. fork(parent, child) gives the child the parent's blocks (ref count + 1
// each): the n samples of a prompt share its KV after one prefill. Only the last block of a sequence is
// ever written, at offsets past its token count, so a shared block needs copying only when it is the
// last, partially filled, and shared: append_slots then takes a fresh block, copies the shared one into
// it on the pool's storage ITSELF (the KV is consistent when it returns; nothing is left for the
// engine to copy), swaps it into the table, and reports the copy. The last sharer to append writes in
// place. Full blocks are immutable and stay shared.
//
// Prefix caching (options.enable_prefix_caching). A full block whose KV has been computed is entered
// in a cache under its chain hash: a 128-bit hash (two independent 64-bit multiply-fold lanes) of the
// parent block's chain hash and this block's token ids, so equal hashes mean equal prefixes. A lookup
// must match the whole chain hash AND the stored token ids, so a false hit needs a 128-bit collision.
// allocate_prompt reuses the longest run of cached leading blocks (ref count + 1) and returns how
// many tokens they hold. A cached block whose ref count falls to 0 stays cached (idle) and is evicted,
// least recently freed first, only when a block is needed and the free list is empty; a sequence's
// blocks are freed tail first, so its tail is evicted before its head. Partial blocks are never cached:
// they are shared only by fork.
//
// When blocks become cacheable. The manager enters full blocks in the cache when it knows their KV is
// written: the engine says so with mark_computed(seq, n) (after the forward that wrote tokens < n), and
// append_slots implies it for every token already in the sequence (one appends only after computing
// the previous tokens). Blocks filled during decode become cacheable this way, as do prompt blocks.
// Call mark_computed before free() to cache a finished sequence's last full block.
//
// Running out. can_allocate / can_append say whether a call fits in free + evictable blocks; the
// scheduler checks them and preempts (free()) the newest sequence when they are false. Calling
// allocate_prompt / append_slots without room is a caller bug: rf::Error, nothing changed.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/rollout/kv_block_pool.h"

namespace rf::engine::rollout {

struct KvBlockManagerOptions {
  bool enable_prefix_caching = false;
};

// One copy-on-write copy, already done on the pool's storage: block `src`'s K and V into `dst`.
struct KvBlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const KvBlockCopy&) const = default;
};

struct KvAppend {
  std::vector<KvBlockCopy> copies;    // performed (see the header comment); for logs and tests
  std::vector<int64_t> slot_mapping;  // the slot of each new token, in order
};

// A chain hash: two independent 64-bit lanes.
struct KvBlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const KvBlockHash&) const = default;
};
// The chain hash of a block holding `tokens` after a block of chain hash `parent`
// (kv_root_block_hash() for the first block of a sequence).
KvBlockHash kv_block_hash(const KvBlockHash& parent, std::span<const int64_t> tokens);
KvBlockHash kv_root_block_hash();

class KvBlockManager {
 public:
  // Owns the pool (num_blocks blocks of `spec`, accounted on `tracker` as kv_block_pool.h says).
  KvBlockManager(const KvCacheSpec& spec, int64_t num_blocks, MemoryTracker* tracker,
                 KvBlockManagerOptions options = {});

  // The storage (keys(layer), values(layer)) for the attention kernel.
  const KvBlockPool& pool() const { return pool_; }
  const KvBlockManagerOptions& options() const { return options_; }

  // --- sequences ----------------------------------------------------------------------------
  // Whether allocate_prompt(prompt) would find room now (counting prefix-cache hits).
  bool can_allocate(std::span<const int64_t> prompt) const;
  // Blocks for new sequence `seq`'s prompt (non-empty; token ids >= 0). Returns the number of leading
  // prompt tokens whose KV is already in the cache: a multiple of block_size, 0 without prefix caching,
  // and never the whole prompt (at most (size - 1) rounded down to a block: the last token is always
  // recomputed for its logits). The engine computes tokens [returned, size) into the slots
  // slot_mapping(seq, returned, size). rf::Error when `seq` exists or there is no room.
  int64_t allocate_prompt(int64_t seq, std::span<const int64_t> prompt);
  // `child` (new) shares all of `parent`'s blocks and tokens.
  void fork(int64_t parent, int64_t child);
  // Whether append_slots(seq, num_new_tokens tokens) would find room now (copy-on-write included).
  bool can_append(int64_t seq, int64_t num_new_tokens) const;
  // Room for new tokens at the end of `seq` (decode: 1; a multi-token append: more): copies a shared
  // partial last block first (copy-on-write, performed here), allocates blocks as needed, returns the
  // copies made and the new tokens' slots. Implies mark_computed(seq, num_tokens(seq)) beforehand.
  // rf::Error when there is no room (nothing changed then).
  KvAppend append_slots(int64_t seq, std::span<const int64_t> new_tokens);
  // The KV of `seq`'s first `num_computed_tokens` tokens is written: its full blocks among them become
  // cacheable (a no-op without prefix caching, or for counts already reported).
  void mark_computed(int64_t seq, int64_t num_computed_tokens);
  // Drops `seq`: each block's ref count - 1; a block at 0 goes to the free list, or, when cached, stays
  // idle in the prefix cache. rf::Error for an unknown id (never allocated, or already freed).
  void free(int64_t seq);

  // --- queries ------------------------------------------------------------------------------
  bool contains(int64_t seq) const { return sequences_.count(seq) != 0; }
  // Valid until the next call that changes `seq`.
  const std::vector<int32_t>& block_table(int64_t seq) const;
  int64_t num_tokens(int64_t seq) const;
  // Slots of tokens [begin, end) of `seq` (the prefill's slot mapping).
  std::vector<int64_t> slot_mapping(int64_t seq, int64_t begin, int64_t end) const;
  int64_t num_sequences() const { return int64_t(sequences_.size()); }
  int64_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks a new allocation can take: the free list plus idle cached blocks (evictable).
  int64_t num_free_blocks() const { return pool_.num_free() + pool_.num_idle(); }
  int64_t num_cached_blocks() const { return pool_.num_idle(); }  // idle, evictable
  int64_t num_used_blocks() const { return pool_.num_used(); }    // ref count > 0
  // Prompt tokens looked up in the prefix cache by allocate_prompt, and those found.
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  // "KV cache: 100 blocks x 16 tokens (96.0 KiB each, 9.4 MiB): 37 used, 50 free, 13 cached; 5 sequences;
  // prefix cache hits 320 of 760 tokens (42.1%)".
  std::string describe() const;

  // --- colocation with training ---------------------------------------------------------------
  // Frees the storage, dropping the prefix cache. rf::Error while any sequence holds blocks.
  void release();
  // Re-allocates it, empty.
  void resume();

 private:
  struct Sequence {
    std::vector<int32_t> block_table;
    std::vector<int64_t> tokens;
    // Chain hashes of the leading full blocks known to be computed (hit or marked), in order.
    std::vector<KvBlockHash> chain;
  };
  // Prefix-cache state of a block; `cached` blocks are in cache_ under hash.lo.
  struct CacheEntry {
    bool cached = false;
    KvBlockHash hash;
    std::vector<int64_t> tokens;               // the block's token ids, to rule out collisions
    std::list<int32_t>::iterator lru_position;  // in lru_ while idle
  };

  Sequence& sequence(int64_t seq, const char* what);
  const Sequence& sequence(int64_t seq, const char* what) const;
  // The cached blocks holding `prompt`'s leading full blocks (at most (size - 1) / block_size), and
  // their chain hashes.
  std::vector<int32_t> match_prefix(std::span<const int64_t> prompt, std::vector<KvBlockHash>* chain) const;
  // A block for new content: from the free list, else by evicting the least recently freed idle block.
  int32_t take_block();
  void uncache(int32_t block);
  // Enters `seq`'s full blocks among its first num_computed tokens in the cache.
  void cache_computed_blocks(Sequence& s, int64_t num_computed);
  int64_t blocks_needed_to_append(const Sequence& s, int64_t num_new_tokens) const;
  int64_t slot_of(const Sequence& s, int64_t position) const;

  KvBlockPool pool_;
  KvBlockManagerOptions options_;
  std::unordered_map<int64_t, Sequence> sequences_;
  std::vector<CacheEntry> entries_;                   // per block
  std::unordered_map<uint64_t, int32_t> cache_;       // chain hash (lo lane) -> block
  std::list<int32_t> lru_;                            // idle cached blocks, least recently freed first
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace rf::engine::rollout
