// Fast SwiGLU for f32 and bf16 (maths in kernels/swiglu.h), elementwise in f32, rows spread over
// threads. The exponential is the vectorisable one of cpu/elementwise.h: libm's expf is a scalar
// call, which the compiler only vectorises under -ffast-math, which we do not use.
// Legend: N tokens, F FFN width.
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// 1 / (1 + e^-g), from e^-|g| so the exponential never overflows. NaN stays NaN.
inline float sigmoid(float g) {
  const float e = exp_nonpositive(-std::fabs(g));
  const float r = 1.0f / (1.0f + e);
  return select(g >= 0.0f, r, e * r);
}

template <class T>
void forward_rows(TensorView gate_NF, TensorView up_NF, TensorView h_NF) {
  const int64_t N = gate_NF.size(0), F = gate_NF.size(1);
  const T* gate = gate_NF.data<T>();
  const T* up = up_NF.data<T>();
  T* h = h_NF.data<T>();
#pragma omp parallel for schedule(static) if (N * F >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const T* gate_row = gate + n * gate_NF.stride(0);
    const T* up_row = up + n * up_NF.stride(0);
    T* h_row = h + n * h_NF.stride(0);
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) {
      const float g = load(gate_row[f]);
      // HF rounds silu(gate) to the activation dtype before multiplying up.
      store(h_row[f], round_as<T>(g * sigmoid(g)) * load(up_row[f]));
    }
  }
}

template <class T>
void backward_rows(TensorView gate_NF, TensorView up_NF, TensorView dh_NF, TensorView dgate_NF, TensorView dup_NF) {
  const int64_t N = gate_NF.size(0), F = gate_NF.size(1);
  const T* gate = gate_NF.data<T>();
  const T* up = up_NF.data<T>();
  const T* dh = dh_NF.data<T>();
  T* dgate = dgate_NF.data<T>();
  T* dup = dup_NF.data<T>();
#pragma omp parallel for schedule(static) if (N * F >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const T* gate_row = gate + n * gate_NF.stride(0);
    const T* up_row = up + n * up_NF.stride(0);
    const T* dh_row = dh + n * dh_NF.stride(0);
    T* dgate_row = dgate + n * dgate_NF.stride(0);
    T* dup_row = dup + n * dup_NF.stride(0);
#pragma omp simd
    for (int64_t f = 0; f < F; ++f) {
      const float g = load(gate_row[f]), u = load(up_row[f]), d = load(dh_row[f]);
      const float s = sigmoid(g);
      store(dgate_row[f], d * u * s * (1.0f + g * (1.0f - s)));
      store(dup_row[f], d * g * s);
    }
  }
}

}  // namespace

void swiglu_forward(TensorView gate_NF, TensorView up_NF, TensorView h_NF) {
  check_swiglu(gate_NF, up_NF, h_NF, "swiglu h_NF");
  switch (gate_NF.dtype()) {
    case DType::f32: return forward_rows<float>(gate_NF, up_NF, h_NF);
    case DType::bf16: return forward_rows<bf16>(gate_NF, up_NF, h_NF);
    default: RF_CHECK(false, "cpu swiglu_forward: {} runs on ref", dtype_name(gate_NF.dtype()));
  }
}

void swiglu_backward(TensorView gate_NF, TensorView up_NF, TensorView dh_NF, TensorView dgate_NF, TensorView dup_NF) {
  check_swiglu(gate_NF, up_NF, dh_NF, "swiglu dh_NF");
  check_swiglu(gate_NF, up_NF, dgate_NF, "swiglu dgate_NF");
  check_swiglu(gate_NF, up_NF, dup_NF, "swiglu dup_NF");
  switch (gate_NF.dtype()) {
    case DType::f32: return backward_rows<float>(gate_NF, up_NF, dh_NF, dgate_NF, dup_NF);
    case DType::bf16: return backward_rows<bf16>(gate_NF, up_NF, dh_NF, dgate_NF, dup_NF);
    default: RF_CHECK(false, "cpu swiglu_backward: {} runs on ref", dtype_name(gate_NF.dtype()));
  }
}

}  // namespace rf::kernels::RF_CPU_NS
