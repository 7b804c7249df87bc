// Entry checks shared by the ref and cpu twins of the row-wise ops (RMSNorm, RoPE, SwiGLU,
// embedding), so that both reject exactly the same calls. Only cheap facts are checked: ranks,
// extents, dtypes, unit inner strides, and (RoPE) that no position is negative.
// The functions sit in an unnamed namespace on purpose: each cpu variant's translation unit gets
// its own copy, so no instance compiled for one instruction set is shared with another (see
// cpu/cpu_kernels.h).
// Legend: N rows or tokens, C hidden, H heads, D head dim, F FFN width, V vocab rows held here.
#pragma once

#include <cstdint>

#include "core/tensor_view.h"
#include "kernels/rope.h"

namespace rf::kernels {
namespace {

inline void check_floating(const TensorView& view, const char* what) {
  RF_CHECK(view.dtype() == DType::f32 || view.dtype() == DType::bf16 || view.dtype() == DType::f64,
           "{}: expected f32, bf16 or f64, got {}", what, dtype_name(view.dtype()));
}

inline void check_ids(const TensorView& ids, const char* what) {
  RF_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, "{}: expected i32 or i64, got {}", what,
           dtype_name(ids.dtype()));
}

inline void check_unit_inner_stride(const TensorView& view, const char* what) {
  RF_CHECK(view.inner_contiguous(), "{}: the last dim must have stride 1, got {}", what, view.describe());
}

inline void check_rank(const TensorView& view, int rank, const char* what) {
  RF_CHECK(view.rank() == rank, "{}: expected rank {}, got {}", what, rank, view.describe());
}

// rstd_N holds f32 statistics for f32 and bf16 input, f64 for f64.
inline DType rmsnorm_stat_dtype(DType x_dtype) { return x_dtype == DType::f64 ? DType::f64 : DType::f32; }

inline void check_rmsnorm_forward(const TensorView& x_NC, const TensorView& w_C, const TensorView& y_NC,
                                  const TensorView& rstd_N) {
  check_rank(x_NC, 2, "rmsnorm x_NC");
  check_floating(x_NC, "rmsnorm x_NC");
  const int64_t N = x_NC.size(0), C = x_NC.size(1);
  check_shape(w_C, {C}, "rmsnorm w_C");
  check_dtype(w_C, x_NC.dtype(), "rmsnorm w_C");
  check_shape(y_NC, {N, C}, "rmsnorm y_NC");
  check_dtype(y_NC, x_NC.dtype(), "rmsnorm y_NC");
  check_shape(rstd_N, {N}, "rmsnorm rstd_N");
  check_dtype(rstd_N, rmsnorm_stat_dtype(x_NC.dtype()), "rmsnorm rstd_N");
  check_unit_inner_stride(x_NC, "rmsnorm x_NC");
  check_unit_inner_stride(w_C, "rmsnorm w_C");
  check_unit_inner_stride(y_NC, "rmsnorm y_NC");
}

inline void check_rmsnorm_backward(const TensorView& dy_NC, const TensorView& x_NC, const TensorView& w_C,
                                   const TensorView& rstd_N, const TensorView& dx_NC, const TensorView& dw_C) {
  check_rmsnorm_forward(x_NC, w_C, dy_NC, rstd_N);  // dy_NC has y_NC's shape and dtype
  check_shape(dx_NC, x_NC.shape(), "rmsnorm dx_NC");
  check_dtype(dx_NC, x_NC.dtype(), "rmsnorm dx_NC");
  check_shape(dw_C, w_C.shape(), "rmsnorm dw_C");
  check_dtype(dw_C, rmsnorm_stat_dtype(x_NC.dtype()), "rmsnorm dw_C");
  check_unit_inner_stride(dx_NC, "rmsnorm dx_NC");
  check_unit_inner_stride(dw_C, "rmsnorm dw_C");
}

// RoPE's parameters and the positions of N tokens with head dim D (also checked by the attention
// kernels when RoPE is fused into them). Returns the number of rotated dims (rotary_dim, or D when it
// is 0).
inline int64_t check_rope_params(const RopeParams& p, const TensorView& pos_N, int64_t N, int64_t D) {
  check_ids(pos_N, "rope pos_N");
  check_shape(pos_N, {N}, "rope pos_N");
  const int64_t rotary_dim = p.rotary_dim == 0 ? D : p.rotary_dim;
  RF_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= D,
           "rope rotary_dim {} must be even and in (0, D={}]", p.rotary_dim, D);
  RF_CHECK(p.theta > 0, "rope theta must be positive, got {}", p.theta);
  const RopeScaling& s = p.scaling;
  RF_CHECK(s.factor > 0, "rope scaling factor must be positive, got {}", s.factor);
  RF_CHECK(s.type != RopeScalingType::llama3 ||
               (s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor && s.original_max_position_embeddings > 0),
           "rope llama3 scaling needs 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0, "
           "got {}, {}, {}",
           s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t offset = n * pos_N.stride(0);
    const int64_t pos = pos_N.dtype() == DType::i32 ? pos_N.data<int32_t>()[offset] : pos_N.data<int64_t>()[offset];
    RF_CHECK(pos >= 0, "rope pos_N[{}] = {} is negative", n, pos);
  }
  return rotary_dim;
}

inline int64_t check_rope(const RopeParams& p, const TensorView& pos_N, const TensorView& x_NHD) {
  check_rank(x_NHD, 3, "rope x_NHD");
  check_floating(x_NHD, "rope x_NHD");
  check_unit_inner_stride(x_NHD, "rope x_NHD");
  return check_rope_params(p, pos_N, x_NHD.size(0), x_NHD.size(2));
}

inline void check_swiglu(const TensorView& gate_NF, const TensorView& up_NF, const TensorView& out_NF,
                         const char* out_name) {
  check_rank(gate_NF, 2, "swiglu gate_NF");
  check_floating(gate_NF, "swiglu gate_NF");
  check_shape(up_NF, gate_NF.shape(), "swiglu up_NF");
  check_dtype(up_NF, gate_NF.dtype(), "swiglu up_NF");
  check_shape(out_NF, gate_NF.shape(), out_name);
  check_dtype(out_NF, gate_NF.dtype(), out_name);
  check_unit_inner_stride(gate_NF, "swiglu gate_NF");
  check_unit_inner_stride(up_NF, "swiglu up_NF");
  check_unit_inner_stride(out_NF, out_name);
}

inline void check_embedding_forward(const TensorView& ids_N, const TensorView& table_VC, const TensorView& out_NC) {
  check_ids(ids_N, "embedding ids_N");
  check_rank(ids_N, 1, "embedding ids_N");
  check_rank(table_VC, 2, "embedding table_VC");
  check_floating(table_VC, "embedding table_VC");
  check_shape(out_NC, {ids_N.size(0), table_VC.size(1)}, "embedding out_NC");
  check_dtype(out_NC, table_VC.dtype(), "embedding out_NC");
  check_unit_inner_stride(table_VC, "embedding table_VC");
  check_unit_inner_stride(out_NC, "embedding out_NC");
}

// dtable_VC is f32 for f32 and bf16 gradients (accumulating into bf16 would lose most small
// updates), f64 for f64.
inline void check_embedding_backward(const TensorView& ids_N, const TensorView& dout_NC, const TensorView& dtable_VC) {
  check_ids(ids_N, "embedding ids_N");
  check_rank(ids_N, 1, "embedding ids_N");
  check_rank(dout_NC, 2, "embedding dout_NC");
  check_floating(dout_NC, "embedding dout_NC");
  check_shape(dout_NC, {ids_N.size(0), dout_NC.size(1)}, "embedding dout_NC");
  check_rank(dtable_VC, 2, "embedding dtable_VC");
  check_shape(dtable_VC, {dtable_VC.size(0), dout_NC.size(1)}, "embedding dtable_VC");
  check_dtype(dtable_VC, dout_NC.dtype() == DType::f64 ? DType::f64 : DType::f32, "embedding dtable_VC");
  check_unit_inner_stride(dout_NC, "embedding dout_NC");
  check_unit_inner_stride(dtable_VC, "embedding dtable_VC");
}

}  // namespace
}  // namespace rf::kernels
