#include "engine/rollout/kv_block_pool.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace rf::engine::rollout {
namespace {

constexpr MemoryTier kTier = MemoryTier::device;

std::string_view state_name(KvBlockState state) {
  switch (state) {
    case KvBlockState::free: return "free";
    case KvBlockState::used: return "used";
    case KvBlockState::idle: return "idle";
  }
  return "?";
}

}  // namespace

KvBlockPool::KvBlockPool(const KvCacheSpec& spec, int64_t num_blocks, MemoryTracker* tracker)
    : spec_(spec), num_blocks_(num_blocks), tracker_(tracker) {
  spec_.validate();
  RF_CHECK(num_blocks > 0 && num_blocks <= std::numeric_limits<int32_t>::max(),
           "KvBlockPool: num_blocks must be in [1, 2^31), got {}", num_blocks);
  resume();
}

KvBlockPool::~KvBlockPool() {
  if (!resident_ || !tracker_) return;
  tracker_->on_release(kTier, MemoryCategory::kv_cache, num_used_ * bytes_per_block());
  tracker_->on_release(kTier, MemoryCategory::workspace, (num_blocks_ - num_used_) * bytes_per_block());
}

void KvBlockPool::check_resident(const char* what) const {
  RF_CHECK(resident_, "KvBlockPool::{}: the KV cache is released; resume() it first", what);
}

void KvBlockPool::check_block(int32_t block, const char* what) const {
  check_resident(what);
  RF_CHECK(block >= 0 && block < num_blocks_, "KvBlockPool::{}: block {} out of range [0, {})", what, block,
           num_blocks_);
}

TensorView KvBlockPool::keys(int64_t layer) const {
  check_resident("keys");
  RF_CHECK(layer >= 0 && layer < spec_.num_layers, "KvBlockPool::keys: layer {} out of range [0, {})", layer,
           spec_.num_layers);
  return keys_[size_t(layer)];
}

TensorView KvBlockPool::values(int64_t layer) const {
  check_resident("values");
  RF_CHECK(layer >= 0 && layer < spec_.num_layers, "KvBlockPool::values: layer {} out of range [0, {})", layer,
           spec_.num_layers);
  return values_[size_t(layer)];
}

void KvBlockPool::copy_block(int32_t src, int32_t dst) {
  check_block(src, "copy_block");
  check_block(dst, "copy_block");
  RF_CHECK(src != dst, "KvBlockPool::copy_block: source and destination are both block {}", src);
  // Each tensor is [num_blocks, block_size, K, D] contiguous: a block is one run of bytes.
  const size_t block_bytes = size_t(bytes_per_block() / (2 * spec_.num_layers));
  for (const auto* tensors : {&keys_, &values_}) {
    for (const Tensor& t : *tensors) {
      auto* base = static_cast<std::byte*>(t.view().raw());
      std::memcpy(base + size_t(dst) * block_bytes, base + size_t(src) * block_bytes, block_bytes);
    }
  }
}

void KvBlockPool::account_used(int64_t num_blocks_delta) {
  num_used_ += num_blocks_delta;
  if (!tracker_) return;
  // Release first, then allocate: the tier total never exceeds the reservation, so the budget check in
  // on_allocate passes (the reservation was checked against the budget in resume()).
  const int64_t bytes = num_blocks_delta * bytes_per_block();
  if (bytes > 0) {
    tracker_->on_release(kTier, MemoryCategory::workspace, bytes);
    tracker_->on_allocate(kTier, MemoryCategory::kv_cache, bytes);
  } else {
    tracker_->on_release(kTier, MemoryCategory::kv_cache, -bytes);
    tracker_->on_allocate(kTier, MemoryCategory::workspace, -bytes);
  }
}

int32_t KvBlockPool::allocate() {
  check_resident("allocate");
  RF_CHECK(!free_list_.empty(), "KvBlockPool::allocate: no free block ({} used, {} idle of {})", num_used_,
           num_idle(), num_blocks_);
  const int32_t block = free_list_.back();
  free_list_.pop_back();
  states_[size_t(block)] = KvBlockState::used;
  ref_counts_[size_t(block)] = 1;
  account_used(1);
  return block;
}

void KvBlockPool::add_ref(int32_t block) {
  check_block(block, "add_ref");
  const KvBlockState state = states_[size_t(block)];
  RF_CHECK(state != KvBlockState::free, "KvBlockPool::add_ref: block {} is free", block);
  ++ref_counts_[size_t(block)];
  if (state == KvBlockState::idle) {
    states_[size_t(block)] = KvBlockState::used;
    account_used(1);
  }
}

int32_t KvBlockPool::remove_ref(int32_t block, OnLastRef on_last) {
  check_block(block, "remove_ref");
  RF_CHECK(states_[size_t(block)] == KvBlockState::used, "KvBlockPool::remove_ref: block {} is {}, not used", block,
           state_name(states_[size_t(block)]));
  const int32_t count = --ref_counts_[size_t(block)];
  if (count == 0) {
    account_used(-1);
    if (on_last == OnLastRef::keep_idle) {
      states_[size_t(block)] = KvBlockState::idle;
    } else {
      states_[size_t(block)] = KvBlockState::free;
      free_list_.push_back(block);
    }
  }
  return count;
}

void KvBlockPool::free_idle(int32_t block) {
  check_block(block, "free_idle");
  RF_CHECK(states_[size_t(block)] == KvBlockState::idle, "KvBlockPool::free_idle: block {} is {}, not idle", block,
           state_name(states_[size_t(block)]));
  states_[size_t(block)] = KvBlockState::free;
  free_list_.push_back(block);
}

KvBlockState KvBlockPool::state(int32_t block) const {
  check_block(block, "state");
  return states_[size_t(block)];
}

int32_t KvBlockPool::ref_count(int32_t block) const {
  check_block(block, "ref_count");
  return ref_counts_[size_t(block)];
}

void KvBlockPool::release() {
  check_resident("release");
  RF_CHECK(num_used_ == 0 && num_idle() == 0,
           "KvBlockPool::release: {} blocks are still used and {} idle; free every sequence and drop the prefix "
           "cache first",
           num_used_, num_idle());
  keys_.clear();
  values_.clear();
  ref_counts_.clear();
  states_.clear();
  free_list_.clear();
  free_list_.shrink_to_fit();
  resident_ = false;
  if (tracker_) tracker_->on_release(kTier, MemoryCategory::workspace, num_blocks_ * bytes_per_block());
}

void KvBlockPool::resume() {
  RF_CHECK(!resident_, "KvBlockPool::resume: the KV cache is already resident");
  const int64_t reserved = num_blocks_ * bytes_per_block();
  if (tracker_) tracker_->on_allocate(kTier, MemoryCategory::workspace, reserved);
  try {
    const Shape shape{num_blocks_, spec_.block_size, spec_.num_kv_heads, spec_.head_dim};
    keys_.reserve(size_t(spec_.num_layers));
    values_.reserve(size_t(spec_.num_layers));
    for (int64_t layer = 0; layer < spec_.num_layers; ++layer) {
      keys_.emplace_back(shape, spec_.dtype);
      values_.emplace_back(shape, spec_.dtype);
    }
  } catch (...) {
    keys_.clear();
    values_.clear();
    if (tracker_) tracker_->on_release(kTier, MemoryCategory::workspace, reserved);
    throw;
  }
  ref_counts_.assign(size_t(num_blocks_), 0);
  states_.assign(size_t(num_blocks_), KvBlockState::free);
  // Pushed in reverse so that a fresh pool hands out blocks 0, 1, 2, ...
  free_list_.resize(size_t(num_blocks_));
  for (int64_t i = 0; i < num_blocks_; ++i) free_list_[size_t(i)] = int32_t(num_blocks_ - 1 - i);
  num_used_ = 0;
  resident_ = true;
}

}  // namespace rf::engine::rollout
