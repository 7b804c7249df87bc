// Fast MoE permutation kernels (moe.h): the routing scan is moe_sort_by_expert (shared with ref);
// what is here is the row traffic. Gather copies whole rows in parallel over rows. Unpermute first
// inverts sorted_indices into each token's rows in increasing j (a counting sort, sequential and
// O(J)), then sums each token's rows in f32 in that order, in parallel over tokens: every element's
// sum has one order whatever the thread count, so the result is bitwise the same on any team.
// The grouped GEMM lives in linear.cpp, on the GEMM engines.
// Legend: N tokens, C hidden, E experts, J routed rows.
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/moe_args.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

void check_dtype_supported(DType dtype, const char* op) {
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16, "{}: cpu kernels take f32 or bf16, got {}", op,
           dtype_name(dtype));
}

// sorted_indices_J as i64, each checked to lie in [0, N) (before any parallel loop: no throw inside one).
std::vector<int64_t> source_rows(const TensorView& sorted_indices_J, int64_t N) {
  const int64_t J = sorted_indices_J.size(0), stride = sorted_indices_J.stride(0);
  std::vector<int64_t> rows(static_cast<size_t>(J));
  for (int64_t j = 0; j < J; ++j) {
    const int64_t n = sorted_indices_J.dtype() == DType::i64 ? sorted_indices_J.data<int64_t>()[j * stride]
                                                              : sorted_indices_J.data<int32_t>()[j * stride];
    RF_CHECK(n >= 0 && n < N, "moe sorted_indices_J[{}] = {} is outside [0, {})", j, n, N);
    rows[size_t(j)] = n;
  }
  return rows;
}

template <class T>
void unpermute_typed(const TensorView& y_JC, const std::vector<int64_t>& source, const TensorView& out_NC,
                     Accumulate mode) {
  const int64_t N = out_NC.size(0), C = out_NC.size(1), J = y_JC.size(0);
  // Counting sort of j by token: rows_of[first[n] .. first[n + 1]) are token n's rows, ascending.
  std::vector<int64_t> first(static_cast<size_t>(N + 1), 0), rows_of(static_cast<size_t>(J));
  for (int64_t j = 0; j < J; ++j) ++first[size_t(source[size_t(j)] + 1)];
  for (int64_t n = 0; n < N; ++n) first[size_t(n + 1)] += first[size_t(n)];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t j = 0; j < J; ++j) rows_of[size_t(next[size_t(source[size_t(j)])]++)] = j;

  const T* y = y_JC.data<T>();
  T* out = out_NC.data<T>();
  const int64_t ldy = y_JC.stride(0), ldo = out_NC.stride(0);
#pragma omp parallel if ((N + J) * C > kMinParallelElements)
  {
    std::vector<float> acc(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      T* dst = out + n * ldo;
      if (mode == Accumulate::add) {
        for (int64_t c = 0; c < C; ++c) acc[size_t(c)] = load(dst[c]);
      } else {
        std::fill(acc.begin(), acc.end(), 0.0f);
      }
      for (int64_t r = first[size_t(n)]; r < first[size_t(n + 1)]; ++r) {
        const T* row = y + rows_of[size_t(r)] * ldy;
        for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += load(row[c]);
      }
      for (int64_t c = 0; c < C; ++c) store(dst[c], acc[size_t(c)]);
    }
  }
}

}  // namespace

void moe_gather(TensorView x_NC, TensorView sorted_indices_J, TensorView y_JC) {
  check_moe_gather_args(x_NC, sorted_indices_J, y_JC);
  check_dtype_supported(x_NC.dtype(), "moe_gather");
  const std::vector<int64_t> source = source_rows(sorted_indices_J, x_NC.size(0));
  const int64_t J = y_JC.size(0), row_bytes = x_NC.size(1) * int64_t(x_NC.element_size());
  const auto* x = static_cast<const std::byte*>(x_NC.raw());
  auto* y = static_cast<std::byte*>(y_JC.raw());
  const int64_t ldx = x_NC.stride(0) * int64_t(x_NC.element_size());
  const int64_t ldy = y_JC.stride(0) * int64_t(y_JC.element_size());
#pragma omp parallel for schedule(static) if (J * row_bytes > kMinParallelElements * 4)
  for (int64_t j = 0; j < J; ++j) std::memcpy(y + j * ldy, x + source[size_t(j)] * ldx, size_t(row_bytes));
}

void moe_permute(TensorView tokens_NC, TensorView routing_map_NE, TensorView probs_NE, TensorView permuted_JC,
                 TensorView permuted_probs_J, TensorView sorted_indices_J, TensorView tokens_per_expert_E) {
  check_moe_permute_args(tokens_NC, routing_map_NE, probs_NE, permuted_JC, permuted_probs_J, sorted_indices_J,
                         tokens_per_expert_E);
  check_dtype_supported(tokens_NC.dtype(), "moe_permute");
  moe_sort_by_expert(routing_map_NE, probs_NE, sorted_indices_J, permuted_probs_J, tokens_per_expert_E);
  moe_gather(tokens_NC, sorted_indices_J, permuted_JC);
}

void moe_unpermute(TensorView y_JC, TensorView sorted_indices_J, TensorView out_NC, Accumulate mode) {
  check_moe_unpermute_args(y_JC, sorted_indices_J, out_NC);
  check_dtype_supported(y_JC.dtype(), "moe_unpermute");
  const std::vector<int64_t> source = source_rows(sorted_indices_J, out_NC.size(0));
  if (y_JC.dtype() == DType::bf16) {
    unpermute_typed<bf16>(y_JC, source, out_NC, mode);
  } else {
    unpermute_typed<float>(y_JC, source, out_NC, mode);
  }
}

}  // namespace rf::kernels::RF_CPU_NS
