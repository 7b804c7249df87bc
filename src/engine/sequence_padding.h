// Sequence parallel splits a micro-batch's N tokens evenly over the TP ranks. A micro-batch whose N
// does not divide gets one padding document at its end (token 0, positions from 0, target -100 =
// no loss), so it takes no loss and gives no gradient; the caller reads only the first N outputs.
// Legend: N tokens.
#pragma once

#include "model/model_inputs.h"

namespace rf::engine {

// `in` is one packed row (batch 1); multiple >= 1. The result's tokens are N rounded up to the multiple.
model::PackedSequences pad_to_multiple(const model::ModelInputs& in, int64_t multiple);

}  // namespace rf::engine
