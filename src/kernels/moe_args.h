// Shared by the ref and cpu MoE kernels, so both reject exactly the same calls: layouts, shapes,
// dtype relations and the group sizes. Which compute dtypes a variant implements is its own check.
// In an unnamed namespace for the reason given in attention_args.h.
// Legend: N tokens, C hidden, E experts, J routed rows, I in-features, O out-features.
#pragma once

#include <climits>
#include <span>

#include "core/tensor_view.h"
#include "kernels/linear_args.h"
#include "kernels/moe.h"

namespace rf::kernels {
namespace {

inline void check_sorted_indices(const TensorView& sorted_indices_J, int64_t J, const char* op) {
  RF_CHECK(sorted_indices_J.dtype() == DType::i32 || sorted_indices_J.dtype() == DType::i64,
           "{} sorted_indices_J: expected i32 or i64, got {}", op, dtype_name(sorted_indices_J.dtype()));
  check_vector(sorted_indices_J, J, "moe sorted_indices_J");
}

// The row copy of permute and gather: rows of x_NC into y_JC, same dtype and width.
inline void check_moe_gather_args(const TensorView& x_NC, const TensorView& sorted_indices_J, const TensorView& y_JC) {
  check_matrix(x_NC, "moe_gather x_NC");
  check_matrix(y_JC, "moe_gather y_JC");
  check_shape(y_JC, {y_JC.size(0), x_NC.size(1)}, "moe_gather y_JC");
  check_dtype(y_JC, x_NC.dtype(), "moe_gather y_JC");
  check_sorted_indices(sorted_indices_J, y_JC.size(0), "moe_gather");
}

inline void check_moe_permute_args(const TensorView& tokens_NC, const TensorView& routing_map_NE,
                                   const TensorView& probs_NE, const TensorView& permuted_JC,
                                   const TensorView& permuted_probs_J, const TensorView& sorted_indices_J,
                                   const TensorView& tokens_per_expert_E) {
  check_matrix(tokens_NC, "moe_permute tokens_NC");
  check_matrix(routing_map_NE, "moe_permute routing_map_NE");
  RF_CHECK(routing_map_NE.dtype() == DType::boolean || routing_map_NE.dtype() == DType::u8,
           "moe_permute routing_map_NE: expected bool or u8, got {}", dtype_name(routing_map_NE.dtype()));
  const int64_t N = tokens_NC.size(0), E = routing_map_NE.size(1), J = permuted_JC.size(0);
  check_shape(routing_map_NE, {N, E}, "moe_permute routing_map_NE");
  check_matrix(permuted_JC, "moe_permute permuted_JC");
  check_shape(permuted_JC, {J, tokens_NC.size(1)}, "moe_permute permuted_JC");
  check_dtype(permuted_JC, tokens_NC.dtype(), "moe_permute permuted_JC");
  check_sorted_indices(sorted_indices_J, J, "moe_permute");
  RF_CHECK(sorted_indices_J.dtype() == DType::i64 || N <= INT32_MAX,
           "moe_permute sorted_indices_J: i32 cannot index {} tokens", N);
  check_vector(tokens_per_expert_E, E, "moe_permute tokens_per_expert_E");
  check_dtype(tokens_per_expert_E, DType::i64, "moe_permute tokens_per_expert_E");
  RF_CHECK(probs_NE.empty() == permuted_probs_J.empty(),
           "moe_permute: probs_NE and permuted_probs_J must both be given or both be empty");
  if (probs_NE.empty()) return;
  check_matrix(probs_NE, "moe_permute probs_NE");
  check_shape(probs_NE, {N, E}, "moe_permute probs_NE");
  check_dtype(probs_NE, DType::f32, "moe_permute probs_NE");
  check_vector(permuted_probs_J, J, "moe_permute permuted_probs_J");
  check_dtype(permuted_probs_J, DType::f32, "moe_permute permuted_probs_J");
}

inline void check_moe_unpermute_args(const TensorView& y_JC, const TensorView& sorted_indices_J,
                                     const TensorView& out_NC) {
  check_matrix(y_JC, "moe_unpermute y_JC");
  check_matrix(out_NC, "moe_unpermute out_NC");
  check_shape(out_NC, {out_NC.size(0), y_JC.size(1)}, "moe_unpermute out_NC");
  check_dtype(out_NC, y_JC.dtype(), "moe_unpermute out_NC");
  check_sorted_indices(sorted_indices_J, y_JC.size(0), "moe_unpermute");
}

// Group sizes non-negative and summing to the rows of the call; one weight per group.
inline void check_group_sizes(std::span<const int64_t> group_sizes_E, int64_t rows, int64_t num_weights,
                              const char* op) {
  RF_CHECK(int64_t(group_sizes_E.size()) == num_weights,
           "{} group_sizes_E: {} groups for {} experts in w_EOI", op, group_sizes_E.size(), num_weights);
  int64_t sum = 0;
  for (size_t e = 0; e < group_sizes_E.size(); ++e) {
    RF_CHECK(group_sizes_E[e] >= 0, "{} group_sizes_E[{}]: negative ({})", op, e, group_sizes_E[e]);
    sum += group_sizes_E[e];
  }
  RF_CHECK(sum == rows, "{} group_sizes_E: sum to {}, but the call has {} rows", op, sum, rows);
}

inline void check_expert_weights(const TensorView& w_EOI, int64_t O, int64_t I, const char* what) {
  RF_CHECK(w_EOI.rank() == 3 && w_EOI.inner_contiguous(),
           "{}: expected a 3-D view [E, O, I] with unit inner stride, got {}", what, w_EOI.describe());
  check_shape(w_EOI, {w_EOI.size(0), O, I}, what);
}

inline void check_grouped_gemm_forward_args(const TensorView& x_NI, const TensorView& w_EOI,
                                            std::span<const int64_t> group_sizes_E, const TensorView& y_NO) {
  check_matrix(x_NI, "grouped_gemm x_NI");
  check_matrix(y_NO, "grouped_gemm y_NO");
  const int64_t N = x_NI.size(0), I = x_NI.size(1), O = y_NO.size(1);
  check_shape(y_NO, {N, O}, "grouped_gemm y_NO");
  check_expert_weights(w_EOI, O, I, "grouped_gemm w_EOI");
  check_dtype(w_EOI, x_NI.dtype(), "grouped_gemm w_EOI");
  check_dtype(y_NO, x_NI.dtype(), "grouped_gemm y_NO");
  check_group_sizes(group_sizes_E, N, w_EOI.size(0), "grouped_gemm");
}

inline void check_grouped_gemm_dgrad_args(const TensorView& dy_NO, const TensorView& w_EOI,
                                          std::span<const int64_t> group_sizes_E, const TensorView& dx_NI) {
  check_matrix(dy_NO, "grouped_gemm_dgrad dy_NO");
  check_matrix(dx_NI, "grouped_gemm_dgrad dx_NI");
  const int64_t N = dy_NO.size(0), O = dy_NO.size(1), I = dx_NI.size(1);
  check_shape(dx_NI, {N, I}, "grouped_gemm_dgrad dx_NI");
  check_expert_weights(w_EOI, O, I, "grouped_gemm_dgrad w_EOI");
  check_dtype(w_EOI, dy_NO.dtype(), "grouped_gemm_dgrad w_EOI");
  check_dtype(dx_NI, dy_NO.dtype(), "grouped_gemm_dgrad dx_NI");
  check_group_sizes(group_sizes_E, N, w_EOI.size(0), "grouped_gemm_dgrad");
}

inline void check_grouped_gemm_wgrad_args(const TensorView& dy_NO, const TensorView& x_NI,
                                          std::span<const int64_t> group_sizes_E, const TensorView& dw_EOI) {
  check_matrix(dy_NO, "grouped_gemm_wgrad dy_NO");
  check_matrix(x_NI, "grouped_gemm_wgrad x_NI");
  const int64_t N = dy_NO.size(0), O = dy_NO.size(1), I = x_NI.size(1);
  check_shape(x_NI, {N, I}, "grouped_gemm_wgrad x_NI");
  check_expert_weights(dw_EOI, O, I, "grouped_gemm_wgrad dw_EOI");
  check_dtype(x_NI, dy_NO.dtype(), "grouped_gemm_wgrad x_NI");
  check_dtype(dw_EOI, param_grad_dtype(dy_NO.dtype()), "grouped_gemm_wgrad dw_EOI");
  check_group_sizes(group_sizes_E, N, dw_EOI.size(0), "grouped_gemm_wgrad");
}

}  // namespace
}  // namespace rf::kernels
