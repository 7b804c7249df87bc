// MiniBatchIterator: the PPO update's mini-batches (verl's DataProto.make_iterator): `epochs` passes
// over the batch, each cut into B / mini_batch_size mini-batches that carry the batch's meta.
// With Shuffle::yes each epoch visits the samples in a fresh permutation, a pure function of
// (seed, epoch): a Fisher-Yates shuffle drawing from Philox(seed, stream = epoch). verl draws its
// permutations from a torch generator seeded once; the orders differ from verl's, the contract
// (every sample once per epoch, reproducible from the seed) is the same.
// Mini-batches are made when asked for, so the iterator holds one batch's worth of copies at a time.
//
// Dimension legend: B batch (samples).
#pragma once

#include <optional>
#include <vector>

#include "rl/batch.h"

namespace rf::rl {

enum class Shuffle : uint8_t { no, yes };  // verl's actor.shuffle

class MiniBatchIterator {
 public:
  // mini_batch_size must divide B, as verl asserts. `batch` must outlive the iterator.
  MiniBatchIterator(const Batch& batch, int64_t mini_batch_size, int64_t epochs, Shuffle shuffle, uint64_t seed);

  int64_t num_mini_batches() const { return epochs_ * per_epoch_; }  // in all epochs
  // The next mini-batch, or nothing after the last.
  std::optional<Batch> next();

 private:
  const Batch& batch_;
  int64_t mini_batch_size_;
  int64_t epochs_;
  Shuffle shuffle_;
  uint64_t seed_;
  int64_t per_epoch_;
  int64_t position_ = 0;       // mini-batches handed out so far
  std::vector<int64_t> order_;  // the current epoch's sample order
};

}  // namespace rf::rl
