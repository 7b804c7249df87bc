// What a Tensor of a shape and dtype allocates, and so what the MemoryTracker counts for it: its bytes padded to
// the allocation's alignment. For plans that count memory without allocating it (model/activation_plan.h).
#pragma once

#include <cstddef>

#include "core/dtype.h"
#include "core/shape.h"

namespace rf {

size_t tensor_allocation_bytes(const Shape& shape, DType dtype);

}  // namespace rf
