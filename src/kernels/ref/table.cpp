#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
constexpr KernelVariant kThisVariant = KernelVariant::ref;
#include "kernels/variant_table.h"
}  // namespace rf::kernels::ref
