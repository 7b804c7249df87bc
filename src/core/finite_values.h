// Whether a tensor holds a NaN or an Inf: the question the training step's NaN policy and the save-time
// refusal of non-finite weights ask (engine/non_finite_check.h). A fast parallel pass for contiguous
// floating tensors, which is how weights, gradients and outputs are stored; any other view element by
// element. Integer dtypes are always finite.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor_view.h"

namespace rf {

bool all_finite(TensorView x);
// The row-major index of the first NaN or Inf (nullopt: none), for naming it in a message.
std::optional<int64_t> first_non_finite(TensorView x);

}  // namespace rf
