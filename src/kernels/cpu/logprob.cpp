// PENDING: replaced by the real cpu logprob kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void logprob_forward(const LogprobParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu logprob_forward not written yet");  }
void logprob_backward(const LogprobParams&, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu logprob_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
