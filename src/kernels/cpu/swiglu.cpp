// Fast SwiGLU for f32 and bf16 (maths in kernels/swiglu.h), elementwise in f32, rows spread over
// threads. The exponential is our own (below) because libm's expf is a scalar call: the compiler
// only vectorises it under -ffast-math, which we do not use.
// Legend: N tokens, F FFN width.
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// e^x for x <= 0, within 1.5 ulp (checked at every float in [-87, 0]): Cody-Waite reduction
// x = k ln2 + r with |r| <= ln2/2, Cephes' degree-6 polynomial for e^r, and 2^k built in the
// exponent bits. Below -87, where 2^k would leave the normal range, it returns 0 (the true value is
// under 1.7e-38 there). NaN is clamped too, so the float-to-int conversion below is always defined;
// callers multiply by their own NaN input anyway.
inline float exp_nonpositive(float x) {
  const float clamped = x > -87.0f ? x : -87.0f;
  // Round to the nearest integer by adding and removing 1.5 * 2^23 (vectorises without SSE4.1).
  const float k = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (clamped - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  const float two_k = std::bit_cast<float>(uint32_t(int32_t(k) + 127) << 23);
  return x < -87.0f ? 0.0f : e_r * two_k;
}

// 1 / (1 + e^-g), from e^-|g| so the exponential never overflows.
inline float sigmoid(float g) {
  const float e = exp_nonpositive(-std::fabs(g));
  const float r = 1.0f / (1.0f + e);
  return g >= 0.0f ? r : e * r;
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
