// A Batch as one byte string, to move it between ranks (batch_exchange.h): a CBOR document holding
// the size, every tensor (name, dtype, shape, raw bytes), the columns and the meta. CBOR, not JSON
// text, because it keeps binary tensor bytes and NaN numbers in the meta and columns exactly.
// Not a file format: both ends are the same build.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rl/batch.h"

namespace rf::rl {

std::vector<uint8_t> encode_batch(const Batch& batch);
// Throws naming what is malformed (a truncated transfer, a tensor whose bytes do not fit its shape).
Batch decode_batch(std::span<const uint8_t> bytes);

}  // namespace rf::rl
