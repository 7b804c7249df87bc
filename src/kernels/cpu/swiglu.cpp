// PENDING: replaced by the real cpu swiglu kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void swiglu_forward(TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu swiglu_forward not written yet");  }
void swiglu_backward(TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu swiglu_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
