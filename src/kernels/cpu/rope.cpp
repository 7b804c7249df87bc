// PENDING: replaced by the real cpu rope kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void rope_forward(const RopeParams&, TensorView, TensorView) { RF_CHECK(false, "cpu rope_forward not written yet");  }
void rope_backward(const RopeParams&, TensorView, TensorView) { RF_CHECK(false, "cpu rope_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
