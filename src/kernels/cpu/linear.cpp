// PENDING: replaced by the real cpu linear kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void gemm(const GemmParams&, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu gemm not written yet");  }
void linear_forward(TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu linear_forward not written yet");  }
void linear_dgrad(TensorView, TensorView, TensorView, Accumulate) { RF_CHECK(false, "cpu linear_dgrad not written yet");  }
void linear_wgrad(TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu linear_wgrad not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
