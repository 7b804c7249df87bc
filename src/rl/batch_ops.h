// Cutting, repeating and padding a Batch (verl's DataProto.chunk / split / repeat and
// pad_dataproto_to_divisor / unpad_dataproto), all as sample selections, so tensors and columns stay
// aligned and meta goes to every piece.
//
// Dimension legend: B batch (samples), G group size (copies of one sample).
#pragma once

#include <vector>

#include "rl/batch.h"

namespace rf::rl {

// `num_chunks` consecutive equal pieces; num_chunks must divide B (verl's "only support equal chunk":
// pad_to_divisor first).
std::vector<Batch> chunk(const Batch& batch, int64_t num_chunks);
// Consecutive pieces of `chunk_size` samples, the last one shorter when chunk_size does not divide B.
std::vector<Batch> split(const Batch& batch, int64_t chunk_size);

// interleave: a a b b (sample i's copies adjacent: verl's repeat_interleave, how the n responses of a
// prompt sit together); tile: a b a b (the whole batch again).
enum class RepeatMode : uint8_t { interleave, tile };
Batch repeat(const Batch& batch, int64_t times, RepeatMode mode);

// What fills the padding. verl pads two ways: pad_dataproto_to_divisor appends the batch's leading
// samples (cycling when more are needed than there are), the dispatcher's auto-padding appends
// copies of the last sample.
enum class PadFill : uint8_t { leading_samples, last_sample };
struct PaddedBatch {
  Batch batch;
  int64_t pad_size = 0;  // samples appended at the end
};
// B rounded up to a multiple of `divisor`. An empty batch is returned unpadded (there is nothing to
// copy, and 0 is a multiple of every divisor).
PaddedBatch pad_to_divisor(const Batch& batch, int64_t divisor, PadFill fill);
// The batch without its last pad_size samples.
Batch unpad(const Batch& batch, int64_t pad_size);

}  // namespace rf::rl
