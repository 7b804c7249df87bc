// KvBlockPool: the paged KV cache's storage and the life of its blocks (reference counts, free list),
// with the memory accounting. Which sequence holds which block, prefix hashes and copy-on-write are
// KvBlockManager's (kv_block_manager.h), the pool's only client in the engine. Not thread-safe: the
// rollout scheduler drives it from one thread.
//
// Storage: per layer a K and a V tensor [num_blocks, block_size, K, D], contiguous, in spec.dtype.
// A token at slot s = block * block_size + offset lives at row s of the [num_blocks * block_size, K, D]
// view of both (the paged-attention kernel's k_cache / v_cache, addressed by i32 block ids).
//
// A block is in one of three states:
//   free  on the free list, content meaningless;
//   used  ref count > 0: held by that many sequences (n samples of a prompt share one block);
//   idle  ref count 0 but kept for the prefix cache: content valid, reclaimable by free_idle().
//
// Accounting rule (DESIGN §9): while resident, the reservation reserved_bytes() =
// num_blocks x bytes_per_block is on the tracker's device tier exactly once, split by block state:
//   used blocks         -> kv_cache
//   free and idle blocks -> workspace
// so tracker.current(device, kv_cache) == num_used() x bytes_per_block (a block shared by n sequences
// counts once) and tracker.current(device) includes the whole reservation. A block changing state moves
// its bytes between the two categories; the tier total does not change. The storage tensors are
// allocated without a tracker (else they would count twice), and their 64-byte alignment padding is not
// counted. resume() accounts the reservation before allocating it, so a device budget that cannot hold
// it fails there, with the tracker's message and nothing allocated. release() returns all of it.
// Legend: L layers, K kv heads (per TP rank), D head dim.
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory_tracker.h"
#include "core/tensor.h"
#include "engine/rollout/kv_cache_spec.h"

namespace rf::engine::rollout {

enum class KvBlockState : uint8_t { free, used, idle };
// What remove_ref does with a block whose count reaches 0.
enum class OnLastRef : uint8_t { to_free_list, keep_idle };

class KvBlockPool {
 public:
  // Allocates the storage (resident); `tracker` may be null (not accounted).
  KvBlockPool(const KvCacheSpec& spec, int64_t num_blocks, MemoryTracker* tracker);
  ~KvBlockPool();
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  const KvCacheSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t bytes_per_block() const { return spec_.bytes_per_block(); }
  // num_blocks x bytes_per_block while resident, 0 after release().
  int64_t reserved_bytes() const { return resident_ ? num_blocks_ * bytes_per_block() : 0; }
  bool resident() const { return resident_; }

  // [num_blocks, block_size, K, D] views of layer `layer`'s cache (writable: the model writes new
  // tokens' K and V at their slots).
  TensorView keys(int64_t layer) const;
  TensorView values(int64_t layer) const;
  // Copies block `src`'s K and V into block `dst` in every layer (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // --- block life ---------------------------------------------------------------------------
  // Takes a block off the free list with ref count 1. rf::Error when the free list is empty.
  int32_t allocate();
  // used: ref count + 1; idle: used again with ref count 1. rf::Error on a free block.
  void add_ref(int32_t block);
  // Ref count - 1 (rf::Error unless used); returns the new count. At 0 the block goes to the free list
  // or stays idle, as `on_last` says.
  int32_t remove_ref(int32_t block, OnLastRef on_last);
  // An idle block goes back to the free list (prefix-cache eviction).
  void free_idle(int32_t block);

  KvBlockState state(int32_t block) const;
  int32_t ref_count(int32_t block) const;
  int64_t num_free() const { return int64_t(free_list_.size()); }
  int64_t num_used() const { return num_used_; }
  int64_t num_idle() const { return num_blocks_ - num_used_ - num_free(); }

  // Frees the storage (colocation with training). rf::Error unless every block is free: the caller
  // frees its sequences and drops its idle blocks first.
  void release();
  // Re-allocates the storage, every block free and zeroed. rf::Error when already resident.
  void resume();

 private:
  void check_block(int32_t block, const char* what) const;
  void check_resident(const char* what) const;
  // Moves one block's bytes between the tracker's kv_cache and workspace categories.
  void account_used(int64_t num_blocks_delta);

  KvCacheSpec spec_;
  int64_t num_blocks_ = 0;
  MemoryTracker* tracker_ = nullptr;
  bool resident_ = false;
  std::vector<Tensor> keys_;    // per layer [num_blocks, block_size, K, D]
  std::vector<Tensor> values_;  // per layer [num_blocks, block_size, K, D]
  std::vector<int32_t> ref_counts_;
  std::vector<KvBlockState> states_;
  std::vector<int32_t> free_list_;  // a stack: the most recently freed block is reused first
  int64_t num_used_ = 0;
};

}  // namespace rf::engine::rollout
