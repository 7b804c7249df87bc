// Reference paged attention and KV-cache write: the definitions in paged_attention.h, one query row
// at a time, in f64 whatever the dtype. A row gathers its scores over positions 0..p through the
// block table, takes their max, the sum of exponentials and the weighted sum of values explicitly,
// in ascending position order, and rounds once. Every row is computed on its own, so the ref is
// batch-invariant trivially. Not here: tiling, online softmax, threads (the cpu kernel's job).
// Legend: N query rows, S sequences, P cache blocks, Z tokens per block, H query heads, K kv heads,
// D head dim.
#include <cmath>
#include <limits>
#include <vector>

#include "core/element_access.h"
#include "kernels/paged_attention_args.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {

void paged_attention_forward(const PagedAttentionParams& p, TensorView q_NHD, TensorView k_cache_PZKD,
                             TensorView v_cache_PZKD, TensorView out_NHD) {
  const auto [N, S, H, K, D, P, Z, scale] = check_paged_attention_args(p, q_NHD, k_cache_PZKD, v_cache_PZKD, out_NHD);
  const int64_t G = H / K;
  std::vector<double> score_T;
  for (int64_t s = 0; s < S; ++s) {
    const int32_t* table_row = p.block_table_SW.data<int32_t>() + s * p.block_table_SW.stride(0);
    const int64_t first = p.query_start[size_t(s)], q_len = p.query_start[size_t(s) + 1] - first;
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t n = first + i, position = p.context_len[size_t(s)] - q_len + i;
      score_T.assign(size_t(position + 1), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = h / G, q_row = n * q_NHD.stride(0) + h * q_NHD.stride(1);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t <= position; ++t) {
          const int64_t k_row = cache_row_offset(k_cache_PZKD, table_row, Z, t, kv);
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += load_f64(q_NHD, q_row + d) * load_f64(k_cache_PZKD, k_row + d);
          score_T[size_t(t)] = scale * dot;
          max_score = std::max(max_score, score_T[size_t(t)]);
        }
        double sum_exp = 0;
        for (int64_t t = 0; t <= position; ++t) sum_exp += std::exp(score_T[size_t(t)] - max_score);
        if (!p.lse_NH.empty())
          store_f64(p.lse_NH, n * p.lse_NH.stride(0) + h * p.lse_NH.stride(1), max_score + std::log(sum_exp));
        const int64_t out_row = n * out_NHD.stride(0) + h * out_NHD.stride(1);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t t = 0; t <= position; ++t)
            acc += std::exp(score_T[size_t(t)] - max_score) *
                   load_f64(v_cache_PZKD, cache_row_offset(v_cache_PZKD, table_row, Z, t, kv) + d);
          store_f64(out_NHD, out_row + d, acc / sum_exp);
        }
      }
    }
  }
}

void kv_cache_write(TensorView k_NKD, TensorView v_NKD, TensorView slot_mapping_N, TensorView k_cache_PZKD,
                    TensorView v_cache_PZKD) {
  const int64_t N = check_kv_cache_write_args(k_NKD, v_NKD, slot_mapping_N, k_cache_PZKD, v_cache_PZKD);
  const int64_t Z = k_cache_PZKD.size(1), K = k_cache_PZKD.size(2), D = k_cache_PZKD.size(3);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t slot = slot_of(slot_mapping_N, n);
    if (slot < 0) continue;
    for (const auto& [src, dst] : {std::pair{k_NKD, k_cache_PZKD}, std::pair{v_NKD, v_cache_PZKD}})
      for (int64_t kv = 0; kv < K; ++kv)
        for (int64_t d = 0; d < D; ++d)
          store_f64(dst, (slot / Z) * dst.stride(0) + (slot % Z) * dst.stride(1) + kv * dst.stride(2) + d,
                    load_f64(src, n * src.stride(0) + kv * src.stride(1) + d));
  }
}

}  // namespace rf::kernels::ref
