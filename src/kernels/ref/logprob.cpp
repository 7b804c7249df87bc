// PENDING: replaced by the real ref logprob kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void logprob_forward(const LogprobParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref logprob_forward not written yet");  }
void logprob_backward(const LogprobParams&, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref logprob_backward not written yet");  }

}  // namespace rf::kernels::ref
