#include "rl/batch_ops.h"

#include <numeric>

namespace rf::rl {
namespace {

// Samples [start, start + length).
Batch samples_range(const Batch& batch, int64_t start, int64_t length) {
  std::vector<int64_t> indices(static_cast<size_t>(length));
  std::iota(indices.begin(), indices.end(), start);
  return batch.select_samples(indices);
}

}  // namespace

std::vector<Batch> chunk(const Batch& batch, int64_t num_chunks) {
  RF_CHECK(num_chunks >= 1, "chunk: num_chunks: expected >= 1, got {}", num_chunks);
  RF_CHECK(batch.size() % num_chunks == 0,
           "chunk: num_chunks={} does not divide the batch's {} samples (pad_to_divisor first)", num_chunks,
           batch.size());
  const int64_t chunk_size = batch.size() / num_chunks;
  std::vector<Batch> pieces;
  for (int64_t c = 0; c < num_chunks; ++c) pieces.push_back(samples_range(batch, c * chunk_size, chunk_size));
  return pieces;
}

std::vector<Batch> split(const Batch& batch, int64_t chunk_size) {
  RF_CHECK(chunk_size >= 1, "split: chunk_size: expected >= 1, got {}", chunk_size);
  std::vector<Batch> pieces;
  for (int64_t start = 0; start < batch.size(); start += chunk_size)
    pieces.push_back(samples_range(batch, start, std::min(chunk_size, batch.size() - start)));
  return pieces;
}

Batch repeat(const Batch& batch, int64_t times, RepeatMode mode) {
  RF_CHECK(times >= 1, "repeat: times: expected >= 1, got {}", times);
  const int64_t B = batch.size();
  std::vector<int64_t> indices;
  indices.reserve(size_t(B * times));
  for (int64_t k = 0; k < B * times; ++k) indices.push_back(mode == RepeatMode::interleave ? k / times : k % B);
  return batch.select_samples(indices);
}

PaddedBatch pad_to_divisor(const Batch& batch, int64_t divisor, PadFill fill) {
  RF_CHECK(divisor >= 1, "pad_to_divisor: divisor: expected >= 1, got {}", divisor);
  const int64_t B = batch.size();
  const int64_t pad_size = (divisor - B % divisor) % divisor;
  std::vector<int64_t> indices(size_t(B + pad_size));
  std::iota(indices.begin(), indices.begin() + B, 0);
  for (int64_t k = 0; k < pad_size; ++k) indices[size_t(B + k)] = fill == PadFill::leading_samples ? k % B : B - 1;
  return {batch.select_samples(indices), pad_size};
}

Batch unpad(const Batch& batch, int64_t pad_size) {
  RF_CHECK(pad_size >= 0 && pad_size <= batch.size(), "unpad: pad_size: expected in [0, {}], got {}", batch.size(),
           pad_size);
  return samples_range(batch, 0, batch.size() - pad_size);
}

}  // namespace rf::rl
