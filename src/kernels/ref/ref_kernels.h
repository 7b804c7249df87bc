// The `ref` kernels: naive, obviously right, f64-capable. They are the oracle every fast kernel is
// tested against, and what optimization_level 0 runs. Loops accumulate in f64 whatever the dtype.
#pragma once

#include "kernels/kernel_table.h"

namespace rf::kernels::ref {
#include "kernels/variant_ops.h"
}  // namespace rf::kernels::ref
