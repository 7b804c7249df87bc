// Reference GEMM and linear layers: one naive triple loop (`matmul`) over strided 2-D views,
// accumulating in f64 whatever the storage dtype and rounding to the output dtype at the end.
// The linear ops are that loop applied to transposed views, so forward and both backward GEMMs
// share one oracle.
// Legend: N rows (tokens), I in-features, O out-features; a GEMM's operands are a_MK, b_KN, c_MN.
#include <type_traits>

#include "core/element_access.h"
#include "core/tensor.h"
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

void check_matrix(const TensorView& m, const char* what) {
  RF_CHECK(m.rank() == 2 && m.inner_contiguous(), "{}: expected a 2-D view with unit inner stride, got {}", what,
           m.describe());
}

// dw and db of a linear layer: f64 for f64 compute, f32 otherwise.
DType param_grad_dtype(DType compute) { return compute == DType::f64 ? DType::f64 : DType::f32; }

// db_O += sum over N of dy_NO.
void reduce_bias_grad(TensorView dy_NO, TensorView db_O) {
  for (int64_t o = 0; o < dy_NO.size(1); ++o) {
    double acc = 0;
    for (int64_t n = 0; n < dy_NO.size(0); ++n) acc += load_f64(dy_NO, n * dy_NO.stride(0) + o);
    const int64_t at = o * db_O.stride(0);
    store_f64(db_O, at, load_f64(db_O, at) + acc);
  }
}

}  // namespace

void gemm(const GemmParams& p, TensorView a, TensorView b, TensorView c) {
  check_matrix(a, "gemm a");
  check_matrix(b, "gemm b");
  check_matrix(c, "gemm c");
  RF_CHECK(b.dtype() == a.dtype(), "gemm: a is {} but b is {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  const TensorView a_MK = p.trans_a == Transpose::yes ? a.transpose(0, 1) : a;
  const TensorView b_KN = p.trans_b == Transpose::yes ? b.transpose(0, 1) : b;
  check_shape(b_KN, {a_MK.size(1), c.size(1)}, "gemm op(b)");
  check_shape(c, {a_MK.size(0), b_KN.size(1)}, "gemm c");
  matmul(a_MK, b_KN, TensorView(), c, p.alpha, p.beta);
}

void linear_forward(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO) {
  check_matrix(x_NI, "linear x_NI");
  check_matrix(w_OI, "linear w_OI");
  check_matrix(y_NO, "linear y_NO");
  const int64_t N = x_NI.size(0), I = x_NI.size(1), O = w_OI.size(0);
  check_shape(w_OI, {O, I}, "linear w_OI");
  check_shape(y_NO, {N, O}, "linear y_NO");
  check_dtype(w_OI, x_NI.dtype(), "linear w_OI");
  check_dtype(y_NO, x_NI.dtype(), "linear y_NO");
  if (!b_O.empty()) {
    check_shape(b_O, {O}, "linear b_O");
    check_dtype(b_O, x_NI.dtype(), "linear b_O");
  }
  matmul(x_NI, w_OI.transpose(0, 1), b_O, y_NO, 1.0, 0.0);
}

void linear_residual_forward(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO) {
  check_matrix(resid_NO, "linear resid_NO");
  check_shape(resid_NO, y_NO.shape(), "linear resid_NO");
  check_dtype(resid_NO, y_NO.dtype(), "linear resid_NO");
  check_matrix(x_NI, "linear x_NI");
  check_matrix(w_OI, "linear w_OI");
  check_matrix(y_NO, "linear y_NO");
  check_shape(w_OI, {y_NO.size(1), x_NI.size(1)}, "linear w_OI");
  check_shape(y_NO, {x_NI.size(0), w_OI.size(0)}, "linear y_NO");
  check_dtype(w_OI, x_NI.dtype(), "linear w_OI");
  check_dtype(y_NO, x_NI.dtype(), "linear y_NO");
  copy_convert(resid_NO, y_NO);  // exact (same dtype); the product adds to it before one rounding
  matmul(x_NI, w_OI.transpose(0, 1), TensorView(), y_NO, 1.0, 1.0);
}

void linear_dgrad(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode) {
  check_matrix(dy_NO, "linear dy_NO");
  check_matrix(w_OI, "linear w_OI");
  check_matrix(dx_NI, "linear dx_NI");
  check_shape(w_OI, {dy_NO.size(1), dx_NI.size(1)}, "linear w_OI");
  check_shape(dx_NI, {dy_NO.size(0), w_OI.size(1)}, "linear dx_NI");
  check_dtype(w_OI, dy_NO.dtype(), "linear w_OI");
  check_dtype(dx_NI, dy_NO.dtype(), "linear dx_NI");
  matmul(dy_NO, w_OI, TensorView(), dx_NI, 1.0, mode == Accumulate::add ? 1.0 : 0.0);
}

void linear_wgrad(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O) {
  check_matrix(dy_NO, "linear dy_NO");
  check_matrix(x_NI, "linear x_NI");
  check_matrix(dw_OI, "linear dw_OI");
  const int64_t N = dy_NO.size(0), O = dy_NO.size(1);
  check_shape(x_NI, {N, x_NI.size(1)}, "linear x_NI");
  check_shape(dw_OI, {O, x_NI.size(1)}, "linear dw_OI");
  check_dtype(x_NI, dy_NO.dtype(), "linear x_NI");
  const DType grad_dtype = param_grad_dtype(dy_NO.dtype());
  check_dtype(dw_OI, grad_dtype, "linear dw_OI");
  if (!db_O.empty()) {
    check_shape(db_O, {O}, "linear db_O");
    check_dtype(db_O, grad_dtype, "linear db_O");
  }
  matmul(dy_NO.transpose(0, 1), x_NI, TensorView(), dw_OI, 1.0, 1.0);
  if (!db_O.empty()) reduce_bias_grad(dy_NO, db_O);
}

}  // namespace rf::kernels::ref
