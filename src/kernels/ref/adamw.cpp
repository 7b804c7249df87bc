// PENDING: replaced by the real ref adamw kernels.
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void adamw_step(const AdamWParams&, TensorView, TensorView, TensorView, TensorView, TensorView) { RF_CHECK(false, "ref adamw_step not written yet");  }

}  // namespace rf::kernels::ref
