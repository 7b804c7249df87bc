// PENDING: replaced by the real ref rmsnorm kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void rmsnorm_forward(const RmsNormParams&, TensorView, TensorView, TensorView, RmsNormSaved&) { RF_CHECK(false, "ref rmsnorm_forward not written yet");  }
void rmsnorm_backward(const RmsNormParams&, TensorView, TensorView, TensorView, const RmsNormSaved&, TensorView, TensorView, Accumulate) { RF_CHECK(false, "ref rmsnorm_backward not written yet");  }

}  // namespace rf::kernels::ref
