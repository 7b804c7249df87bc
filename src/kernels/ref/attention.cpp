// PENDING: replaced by the real ref attention kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void attention_forward(const AttentionParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref attention_forward not written yet");  }
void attention_backward(const AttentionParams&, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref attention_backward not written yet");  }

}  // namespace rf::kernels::ref
