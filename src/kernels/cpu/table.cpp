#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {
constexpr KernelVariant kThisVariant = KernelVariant::RF_CPU_NS;
#include "kernels/variant_table.h"
}  // namespace rf::kernels::RF_CPU_NS
