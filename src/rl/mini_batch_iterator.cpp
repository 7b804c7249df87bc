#include "rl/mini_batch_iterator.h"

#include <algorithm>
#include <numeric>
#include <span>

#include "core/philox.h"

namespace rf::rl {

MiniBatchIterator::MiniBatchIterator(const Batch& batch, int64_t mini_batch_size, int64_t epochs, Shuffle shuffle,
                                     uint64_t seed)
    : batch_(batch), mini_batch_size_(mini_batch_size), epochs_(epochs), shuffle_(shuffle), seed_(seed) {
  RF_CHECK(mini_batch_size >= 1, "mini_batch_size: expected >= 1, got {}", mini_batch_size);
  RF_CHECK(epochs >= 1, "epochs: expected >= 1, got {}", epochs);
  RF_CHECK(batch.size() % mini_batch_size == 0, "mini_batch_size: {} does not divide the batch's {} samples",
           mini_batch_size, batch.size());
  per_epoch_ = batch.size() / mini_batch_size;
}

std::optional<Batch> MiniBatchIterator::next() {
  if (position_ >= num_mini_batches()) return std::nullopt;
  const int64_t epoch = position_ / per_epoch_;
  const int64_t step = position_ % per_epoch_;
  if (step == 0) {
    order_.resize(size_t(batch_.size()));
    std::iota(order_.begin(), order_.end(), 0);
    if (shuffle_ == Shuffle::yes) {
      const Philox rng(seed_, uint64_t(epoch));
      for (int64_t i = batch_.size() - 1; i > 0; --i) {
        const auto j = std::min(i, int64_t(rng.uniform(uint64_t(i)) * double(i + 1)));
        std::swap(order_[size_t(i)], order_[size_t(j)]);
      }
    }
  }
  ++position_;
  return batch_.select_samples(std::span(order_).subspan(size_t(step * mini_batch_size_), size_t(mini_batch_size_)));
}

}  // namespace rf::rl
