#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {
constexpr KernelVariant kThisVariant = KernelVariant::RF_CPU_NS;
#include "kernels/variant_table.h"

const KernelTable& openblas_table() {
  static const KernelTable kTable = [] {
    KernelTable t = table();
    t.gemm = gemm_with<GemmLibrary::openblas>;
    t.linear_forward = linear_forward_with<GemmLibrary::openblas>;
    t.linear_residual_forward = linear_residual_forward_with<GemmLibrary::openblas>;
    t.linear_dgrad = linear_dgrad_with<GemmLibrary::openblas>;
    t.linear_wgrad = linear_wgrad_with<GemmLibrary::openblas>;
    return t;
  }();
  return kTable;
}
}  // namespace rf::kernels::RF_CPU_NS
