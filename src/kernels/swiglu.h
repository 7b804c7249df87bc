// SwiGLU activation of the gated MLP: h = silu(gate) * up, silu(g) = g * sigmoid(g).
// For bf16, silu(gate) is rounded to bf16 before it multiplies up, as HF's `act_fn(gate) * up` does.
// Backward: dgate = dh * up * s * (1 + g * (1 - s)), dup = dh * g * s, with s = sigmoid(g).
// Legend: N tokens, F FFN width.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

using SwiGluForward = void(TensorView gate_NF, TensorView up_NF, TensorView h_NF);
using SwiGluForwardFn = SwiGluForward*;
// dgate_NF and dup_NF are overwritten.
using SwiGluBackward = void(TensorView gate_NF, TensorView up_NF, TensorView dh_NF, TensorView dgate_NF,
                                  TensorView dup_NF);
using SwiGluBackwardFn = SwiGluBackward*;

}  // namespace rf::kernels
