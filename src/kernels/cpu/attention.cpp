// PENDING: replaced by the real cpu attention kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void attention_forward(const AttentionParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu attention_forward not written yet");  }
void attention_backward(const AttentionParams&, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu attention_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
