// PENDING: replaced by the real cpu embedding kernels.
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

void embedding_forward(const EmbeddingParams&, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu embedding_forward not written yet");  }
void embedding_backward(const EmbeddingParams&, TensorView, TensorView, TensorView) { RF_CHECK(false, "cpu embedding_backward not written yet");  }

}  // namespace rf::kernels::RF_CPU_NS
