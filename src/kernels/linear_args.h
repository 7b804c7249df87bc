// Shared by the ref and cpu GEMM / linear kernels, so both reject exactly the same calls: the
// layouts (2-D, unit inner stride), the shapes, and the dtype relations between the operands of
// each op. Which compute dtypes a variant implements is its own check (cpu: f32 and bf16; ref
// also f64). In an unnamed namespace for the reason given in attention_args.h.
// Legend: N rows (tokens), I in-features, O out-features; a GEMM's operands are a_MK, b_KN, c_MN.
#pragma once

#include "core/tensor_view.h"
#include "kernels/linear.h"

namespace rf::kernels {
namespace {

inline void check_matrix(const TensorView& m, const char* what) {
  RF_CHECK(m.rank() == 2 && m.inner_contiguous(), "{}: expected a 2-D view with unit inner stride, got {}", what,
           m.describe());
}

inline void check_vector(const TensorView& v, int64_t extent, const char* what) {
  check_shape(v, {extent}, what);
  RF_CHECK(v.inner_contiguous(), "{}: expected unit stride, got {}", what, v.describe());
}

// dw and db of a linear layer: f64 for f64 compute, f32 otherwise.
inline DType param_grad_dtype(DType compute) { return compute == DType::f64 ? DType::f64 : DType::f32; }

struct GemmOperands {
  TensorView a_MK, b_KN;
};

// op(a) and op(b) of a GEMM once its operands are checked.
inline GemmOperands check_gemm_args(const GemmParams& p, const TensorView& a, const TensorView& b,
                                    const TensorView& c) {
  check_matrix(a, "gemm a");
  check_matrix(b, "gemm b");
  check_matrix(c, "gemm c");
  RF_CHECK(b.dtype() == a.dtype(), "gemm: a is {} but b is {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  const TensorView a_MK = p.trans_a == Transpose::yes ? a.transpose(0, 1) : a;
  const TensorView b_KN = p.trans_b == Transpose::yes ? b.transpose(0, 1) : b;
  check_shape(b_KN, {a_MK.size(1), c.size(1)}, "gemm op(b)");
  check_shape(c, {a_MK.size(0), b_KN.size(1)}, "gemm c");
  return {a_MK, b_KN};
}

// x_NI, w_OI and y_NO of a forward (also the residual forward's).
inline void check_linear_product(const TensorView& x_NI, const TensorView& w_OI, const TensorView& y_NO) {
  check_matrix(x_NI, "linear x_NI");
  check_matrix(w_OI, "linear w_OI");
  check_matrix(y_NO, "linear y_NO");
  const int64_t N = x_NI.size(0), I = x_NI.size(1), O = w_OI.size(0);
  check_shape(w_OI, {O, I}, "linear w_OI");
  check_shape(y_NO, {N, O}, "linear y_NO");
  check_dtype(w_OI, x_NI.dtype(), "linear w_OI");
  check_dtype(y_NO, x_NI.dtype(), "linear y_NO");
}

inline void check_linear_forward_args(const TensorView& x_NI, const TensorView& w_OI, const TensorView& b_O,
                                      const TensorView& y_NO) {
  check_linear_product(x_NI, w_OI, y_NO);
  if (b_O.empty()) return;
  check_vector(b_O, w_OI.size(0), "linear b_O");
  check_dtype(b_O, x_NI.dtype(), "linear b_O");
}

inline void check_linear_residual_forward_args(const TensorView& x_NI, const TensorView& w_OI,
                                               const TensorView& resid_NO, const TensorView& y_NO) {
  check_linear_product(x_NI, w_OI, y_NO);
  check_matrix(resid_NO, "linear resid_NO");
  check_shape(resid_NO, y_NO.shape(), "linear resid_NO");
  check_dtype(resid_NO, x_NI.dtype(), "linear resid_NO");
  RF_CHECK(resid_NO.raw() != y_NO.raw(), "linear_residual_forward: resid_NO and y_NO must not alias");
}

inline void check_linear_dgrad_args(const TensorView& dy_NO, const TensorView& w_OI, const TensorView& dx_NI) {
  check_matrix(dy_NO, "linear dy_NO");
  check_matrix(w_OI, "linear w_OI");
  check_matrix(dx_NI, "linear dx_NI");
  check_shape(w_OI, {dy_NO.size(1), dx_NI.size(1)}, "linear w_OI");
  check_shape(dx_NI, {dy_NO.size(0), w_OI.size(1)}, "linear dx_NI");
  check_dtype(w_OI, dy_NO.dtype(), "linear w_OI");
  check_dtype(dx_NI, dy_NO.dtype(), "linear dx_NI");
}

inline void check_linear_wgrad_args(const TensorView& dy_NO, const TensorView& x_NI, const TensorView& dw_OI,
                                    const TensorView& db_O) {
  check_matrix(dy_NO, "linear dy_NO");
  check_matrix(x_NI, "linear x_NI");
  check_matrix(dw_OI, "linear dw_OI");
  const int64_t N = dy_NO.size(0), O = dy_NO.size(1);
  check_shape(x_NI, {N, x_NI.size(1)}, "linear x_NI");
  check_shape(dw_OI, {O, x_NI.size(1)}, "linear dw_OI");
  check_dtype(x_NI, dy_NO.dtype(), "linear x_NI");
  const DType grad_dtype = param_grad_dtype(dy_NO.dtype());
  check_dtype(dw_OI, grad_dtype, "linear dw_OI");
  if (db_O.empty()) return;
  check_vector(db_O, O, "linear db_O");
  check_dtype(db_O, grad_dtype, "linear db_O");
}

}  // namespace
}  // namespace rf::kernels
