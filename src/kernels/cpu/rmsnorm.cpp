// PENDING: replaced by the real cpu rmsnorm kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void rmsnorm_forward(const RmsNormParams&, TensorView, TensorView, TensorView, RmsNormSaved&) { RF_CHECK(false, "cpu rmsnorm_forward not written yet");  }
void rmsnorm_backward(const RmsNormParams&, TensorView, TensorView, TensorView, const RmsNormSaved&, TensorView, TensorView, Accumulate) { RF_CHECK(false, "cpu rmsnorm_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
