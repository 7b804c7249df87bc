// Reference MoE kernels: the permutation's row copies and sums as element loops (sums in f64 in
// increasing j, rounded once), the grouped GEMM as one ref linear layer per expert: the plain
// definitions of moe.h.
// Legend: N tokens, C hidden, E experts, J routed rows, I in-features, O out-features.
#include "core/element_access.h"
#include "core/tensor.h"
#include "kernels/moe_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

// sorted_indices_J[j], bounds-checked against the N rows it indexes.
int64_t source_row(const TensorView& sorted_indices_J, int64_t j, int64_t N) {
  const int64_t n = int64_t(load_f64(sorted_indices_J, j * sorted_indices_J.stride(0)));
  RF_CHECK(n >= 0 && n < N, "moe sorted_indices_J[{}] = {} is outside [0, {})", j, n, N);
  return n;
}

}  // namespace

void moe_gather(TensorView x_NC, TensorView sorted_indices_J, TensorView y_JC) {
  check_moe_gather_args(x_NC, sorted_indices_J, y_JC);
  for (int64_t j = 0; j < y_JC.size(0); ++j)
    copy_convert(x_NC.select(0, source_row(sorted_indices_J, j, x_NC.size(0))), y_JC.select(0, j));
}

void moe_permute(TensorView tokens_NC, TensorView routing_map_NE, TensorView probs_NE, TensorView permuted_JC,
                 TensorView permuted_probs_J, TensorView sorted_indices_J, TensorView tokens_per_expert_E) {
  check_moe_permute_args(tokens_NC, routing_map_NE, probs_NE, permuted_JC, permuted_probs_J, sorted_indices_J,
                         tokens_per_expert_E);
  moe_sort_by_expert(routing_map_NE, probs_NE, sorted_indices_J, permuted_probs_J, tokens_per_expert_E);
  moe_gather(tokens_NC, sorted_indices_J, permuted_JC);
}

void moe_unpermute(TensorView y_JC, TensorView sorted_indices_J, TensorView out_NC, Accumulate mode) {
  check_moe_unpermute_args(y_JC, sorted_indices_J, out_NC);
  const int64_t N = out_NC.size(0), C = out_NC.size(1), J = y_JC.size(0);
  Tensor sum({N, C}, DType::f64);  // zeros
  double* acc = sum.data<double>();
  for (int64_t j = 0; j < J; ++j) {
    const int64_t n = source_row(sorted_indices_J, j, N);
    for (int64_t c = 0; c < C; ++c) acc[n * C + c] += load_f64(y_JC, j * y_JC.stride(0) + c);
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = n * out_NC.stride(0) + c;
      store_f64(out_NC, at, mode == Accumulate::add ? load_f64(out_NC, at) + acc[n * C + c] : acc[n * C + c]);
    }
  }
}

void grouped_gemm_forward(TensorView x_NI, TensorView w_EOI, std::span<const int64_t> group_sizes_E, TensorView y_NO) {
  check_grouped_gemm_forward_args(x_NI, w_EOI, group_sizes_E, y_NO);
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes_E.size(); row += group_sizes_E[e], ++e)
    linear_forward(x_NI.slice(0, row, group_sizes_E[e]), w_EOI.select(0, int64_t(e)), TensorView(),
                   y_NO.slice(0, row, group_sizes_E[e]));
}

void grouped_gemm_dgrad(TensorView dy_NO, TensorView w_EOI, std::span<const int64_t> group_sizes_E, TensorView dx_NI,
                        Accumulate mode) {
  check_grouped_gemm_dgrad_args(dy_NO, w_EOI, group_sizes_E, dx_NI);
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes_E.size(); row += group_sizes_E[e], ++e)
    linear_dgrad(dy_NO.slice(0, row, group_sizes_E[e]), w_EOI.select(0, int64_t(e)),
                 dx_NI.slice(0, row, group_sizes_E[e]), mode);
}

// An empty group's product is the zero matrix: overwriting writes zeros, adding leaves dw_e alone.
void grouped_gemm_wgrad(TensorView dy_NO, TensorView x_NI, std::span<const int64_t> group_sizes_E, TensorView dw_EOI,
                        Accumulate mode) {
  check_grouped_gemm_wgrad_args(dy_NO, x_NI, group_sizes_E, dw_EOI);
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes_E.size(); row += group_sizes_E[e], ++e)
    linear_wgrad(dy_NO.slice(0, row, group_sizes_E[e]), x_NI.slice(0, row, group_sizes_E[e]),
                 dw_EOI.select(0, int64_t(e)), TensorView(), mode);
}

}  // namespace rf::kernels::ref
