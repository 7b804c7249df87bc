// Reference SwiGLU (maths in kernels/swiglu.h), elementwise in f64 with std::exp. For bf16 the
// activation silu(gate) is rounded to bf16 before it multiplies up, as HF's `act_fn(gate) * up`
// does on bf16 tensors.
// Legend: N tokens, F FFN width.
#include <cmath>

#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::ref {
namespace {

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

}  // namespace

void swiglu_forward(TensorView gate_NF, TensorView up_NF, TensorView h_NF) {
  check_swiglu(gate_NF, up_NF, h_NF, "swiglu h_NF");
  for (int64_t n = 0; n < gate_NF.size(0); ++n) {
    for (int64_t f = 0; f < gate_NF.size(1); ++f) {
      const double g = load_f64(gate_NF, n * gate_NF.stride(0) + f);
      double silu = g * sigmoid(g);
      if (gate_NF.dtype() == DType::bf16) silu = to_f32(to_bf16(float(silu)));
      store_f64(h_NF, n * h_NF.stride(0) + f, silu * load_f64(up_NF, n * up_NF.stride(0) + f));
    }
  }
}

void swiglu_backward(TensorView gate_NF, TensorView up_NF, TensorView dh_NF, TensorView dgate_NF, TensorView dup_NF) {
  check_swiglu(gate_NF, up_NF, dh_NF, "swiglu dh_NF");
  check_swiglu(gate_NF, up_NF, dgate_NF, "swiglu dgate_NF");
  check_swiglu(gate_NF, up_NF, dup_NF, "swiglu dup_NF");
  for (int64_t n = 0; n < gate_NF.size(0); ++n) {
    for (int64_t f = 0; f < gate_NF.size(1); ++f) {
      const double g = load_f64(gate_NF, n * gate_NF.stride(0) + f);
      const double up = load_f64(up_NF, n * up_NF.stride(0) + f);
      const double dh = load_f64(dh_NF, n * dh_NF.stride(0) + f);
      const double s = sigmoid(g);
      store_f64(dgate_NF, n * dgate_NF.stride(0) + f, dh * up * s * (1.0 + g * (1.0 - s)));
      store_f64(dup_NF, n * dup_NF.stride(0) + f, dh * g * s);
    }
  }
}

}  // namespace rf::kernels::ref
