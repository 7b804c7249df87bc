// Fast RoPE for f32 and bf16 (maths in kernels/rope.h), in place. The angles come from one
// RopeAngleTable per call (rope_angles.h: cosines and sines in f32 from f64 angles, once per
// distinct position); tokens are spread over threads and each rotates its H heads in f32.
// Legend: N tokens, H heads, D head dim, F = rotary_dim / 2.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/rope_angles.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

template <class T>
void rotate_tokens(const RopeAngleTable& angles, TensorView x_NHD) {
  const int64_t N = x_NHD.size(0), H = x_NHD.size(1), F = angles.num_frequencies();
  T* x = x_NHD.data<T>();
  const int64_t token_stride = x_NHD.stride(0), head_stride = x_NHD.stride(1);
#pragma omp parallel for schedule(static) if (N * H * F * 2 >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = angles.row(n);
    for (int64_t h = 0; h < H; ++h) rotate_head(x + n * token_stride + h * head_stride, F, row);
  }
}

// Rotates the first rotary_dim dims of every head by +angle (sign 1) or -angle (sign -1).
void rotate(const RopeParams& p, TensorView pos_N, TensorView x_NHD, double sign) {
  const int64_t rotary_dim = check_rope(p, pos_N, x_NHD);
  RF_CHECK(x_NHD.dtype() == DType::f32 || x_NHD.dtype() == DType::bf16, "cpu rope: {} runs on ref",
           dtype_name(x_NHD.dtype()));
  const RopeAngleTable angles(p, pos_N, rotary_dim, sign);
  if (x_NHD.dtype() == DType::f32)
    rotate_tokens<float>(angles, x_NHD);
  else
    rotate_tokens<bf16>(angles, x_NHD);
}

}  // namespace

void rope_forward(const RopeParams& p, TensorView pos_N, TensorView x_NHD) { rotate(p, pos_N, x_NHD, 1.0); }

void rope_backward(const RopeParams& p, TensorView pos_N, TensorView dx_NHD) { rotate(p, pos_N, dx_NHD, -1.0); }

}  // namespace rf::kernels::RF_CPU_NS
