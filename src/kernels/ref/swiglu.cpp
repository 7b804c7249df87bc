// PENDING: replaced by the real ref swiglu kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void swiglu_forward(TensorView, TensorView, TensorView) { RF_CHECK(false, "ref swiglu_forward not written yet");  }
void swiglu_backward(TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref swiglu_backward not written yet");  }

}  // namespace rf::kernels::ref
