// PENDING: replaced by the real cpu adamw kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void adamw_step(const AdamWParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu adamw_step not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
