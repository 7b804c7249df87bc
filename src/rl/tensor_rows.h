// Whole-row operations on tensors whose first dim is the batch: what Batch needs to move samples.
// A row is everything under one index of the first dim, copied as bytes (so i64 ids beyond 2^53 and
// NaN payloads survive). Sources may be strided; results are new contiguous tensors.
//
// Dimension legend: B batch (samples).
#pragma once

#include <span>
#include <string>

#include "core/tensor.h"

namespace rf::rl {

// Rows `rows` of src_B, in that order (repeats allowed). `what` names the tensor in errors.
Tensor gather_rows(TensorView src_B, std::span<const int64_t> rows, const std::string& what);
// The rows of every part, one part after another. Parts share dtype and trailing dims.
Tensor concat_rows(std::span<const TensorView> parts, const std::string& what);
// Same dtype, same shape and equal elements (floats compare by value: -0 == 0 and NaN != NaN, as
// torch.equal; integers and bools exactly).
bool tensors_equal(TensorView a, TensorView b);

}  // namespace rf::rl
