// PENDING: replaced by the real ref rope kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void rope_forward(const RopeParams&, TensorView, TensorView) { RF_CHECK(false, "ref rope_forward not written yet");  }
void rope_backward(const RopeParams&, TensorView, TensorView) { RF_CHECK(false, "ref rope_backward not written yet");  }

}  // namespace rf::kernels::ref
