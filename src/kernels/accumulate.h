// How a kernel writes an activation gradient (DESIGN §2): parameter gradients always `+=`;
// activation gradients `=` (overwrite), except on the residual stream, which `+=` (add).
#pragma once

#include <cstdint>

namespace rf::kernels {

enum class Accumulate : uint8_t { overwrite, add };

}  // namespace rf::kernels
