// PENDING: replaced by the real ref linear kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void gemm(const GemmParams&, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref gemm not written yet");  }
void linear_forward(TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref linear_forward not written yet");  }
void linear_dgrad(TensorView, TensorView, TensorView, Accumulate) { RF_CHECK(false, "ref linear_dgrad not written yet");  }
void linear_wgrad(TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref linear_wgrad not written yet");  }

}  // namespace rf::kernels::ref
