// Reference GEMM and linear layers: one naive triple loop (`matmul`) over strided 2-D views,
// accumulating in f64 whatever the storage dtype and rounding to the output dtype at the end.
// The linear ops are that loop applied to transposed views, so forward and both backward GEMMs
// share one oracle.
// Legend: N rows (tokens), I in-features, O out-features; a GEMM's operands are a_MK, b_KN, c_MN.
#include <type_traits>

#include "core/element_access.h"
#include "core/tensor.h"
#include "kernels/linear_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

double widen(double x) { return x; }
double widen(float x) { return x; }
double widen(bf16 x) { return to_f32(x); }

template <class T>
T narrow(double x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_bf16(float(x));
  } else {
    return T(x);
  }
}

// c_MN = alpha * a_MK b_KN (+ bias_N on every row) + beta * c_MN; c is not read when beta == 0.
// The bias has b's dtype: in a linear layer both are parameters.
template <class TA, class TC>
void matmul_typed(TensorView a_MK, TensorView b_KN, TensorView bias_N, TensorView c_MN, double alpha, double beta) {
  const TA* a = a_MK.data<TA>();
  const TA* b = b_KN.data<TA>();
  const TA* bias = bias_N.empty() ? nullptr : bias_N.data<TA>();
  TC* c = c_MN.data<TC>();
  const int64_t M = c_MN.size(0), N = c_MN.size(1), K = a_MK.size(1);
  // Strides read once: the view accessors check their dim argument, too slow for the inner loop.
  const int64_t a_m = a_MK.stride(0), a_k = a_MK.stride(1), b_k = b_KN.stride(0), b_n = b_KN.stride(1);
  const int64_t c_m = c_MN.stride(0), c_n = c_MN.stride(1), bias_n = bias ? bias_N.stride(0) : 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += widen(a[m * a_m + k * a_k]) * widen(b[k * b_k + n * b_n]);
      double out = alpha * acc;
      if (bias) out += widen(bias[n * bias_n]);
      TC& dst = c[m * c_m + n * c_n];
      if (beta != 0) out += beta * widen(dst);
      dst = narrow<TC>(out);
    }
  }
}

void matmul(TensorView a_MK, TensorView b_KN, TensorView bias_N, TensorView c_MN, double alpha, double beta) {
  const DType in = a_MK.dtype(), out = c_MN.dtype();
  if (in == DType::f64 && out == DType::f64) return matmul_typed<double, double>(a_MK, b_KN, bias_N, c_MN, alpha, beta);
  if (in == DType::f32 && out == DType::f32) return matmul_typed<float, float>(a_MK, b_KN, bias_N, c_MN, alpha, beta);
  if (in == DType::bf16 && out == DType::f32) return matmul_typed<bf16, float>(a_MK, b_KN, bias_N, c_MN, alpha, beta);
  if (in == DType::bf16 && out == DType::bf16) return matmul_typed<bf16, bf16>(a_MK, b_KN, bias_N, c_MN, alpha, beta);
  RF_CHECK(false, "gemm: unsupported dtypes {} x {} -> {}", dtype_name(in), dtype_name(b_KN.dtype()),
           dtype_name(out));
}

// db_O (= or +=) sum over N of dy_NO.
void reduce_bias_grad(TensorView dy_NO, TensorView db_O, Accumulate mode) {
  for (int64_t o = 0; o < dy_NO.size(1); ++o) {
    double acc = 0;
    for (int64_t n = 0; n < dy_NO.size(0); ++n) acc += load_f64(dy_NO, n * dy_NO.stride(0) + o);
    const int64_t at = o * db_O.stride(0);
    store_f64(db_O, at, mode == Accumulate::add ? load_f64(db_O, at) + acc : acc);
  }
}

}  // namespace

void gemm(const GemmParams& p, TensorView a, TensorView b, TensorView c) {
  const auto [a_MK, b_KN] = check_gemm_args(p, a, b, c);
  matmul(a_MK, b_KN, TensorView(), c, p.alpha, p.beta);
}

void linear_forward(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO) {
  check_linear_forward_args(x_NI, w_OI, b_O, y_NO);
  matmul(x_NI, w_OI.transpose(0, 1), b_O, y_NO, 1.0, 0.0);
}

void linear_residual_forward(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO) {
  check_linear_residual_forward_args(x_NI, w_OI, resid_NO, y_NO);
  copy_convert(resid_NO, y_NO);  // exact (same dtype); the product adds to it before one rounding
  matmul(x_NI, w_OI.transpose(0, 1), TensorView(), y_NO, 1.0, 1.0);
}

void linear_dgrad(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode) {
  check_linear_dgrad_args(dy_NO, w_OI, dx_NI);
  matmul(dy_NO, w_OI, TensorView(), dx_NI, 1.0, mode == Accumulate::add ? 1.0 : 0.0);
}

void linear_wgrad(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode) {
  check_linear_wgrad_args(dy_NO, x_NI, dw_OI, db_O);
  matmul(dy_NO.transpose(0, 1), x_NI, TensorView(), dw_OI, 1.0, mode == Accumulate::add ? 1.0 : 0.0);
  if (!db_O.empty()) reduce_bias_grad(dy_NO, db_O, mode);
}

}  // namespace rf::kernels::ref
