#include "model/paged_order_attention.h"

#include <algorithm>

namespace rf::model {

void attention_forward_paged_order(const kernels::KernelRegistry& kernels, std::span<const int32_t> cu_seqlens,
                                   int64_t B, int64_t T, TensorView q_NHD, TensorView k_NKD, TensorView v_NKD,
                                   TensorView out_NHD, TensorView lse_BHT, PagedOrderScratch& scratch) {
  const int64_t H = q_NHD.size(1), K = k_NKD.size(1), D = k_NKD.size(2);
  RF_CHECK(q_NHD.size(0) == B * T && lse_BHT.rank() == 3 && lse_BHT.size(0) == B && lse_BHT.size(1) == H &&
               lse_BHT.size(2) == T,
           "attention_forward_paged_order: q {} and lse {} for B = {}, T = {}", q_NHD.describe(), lse_BHT.describe(),
           B, T);
  std::vector<int32_t>& query_start = scratch.query_start;
  std::vector<int32_t>& context_len = scratch.context_len;
  std::vector<int32_t>& block_table = scratch.block_table;
  for (int64_t b = 0; b < B; ++b) {
    // Row b's documents as [start, end) offsets inside the row.
    query_start.assign(1, 0);
    if (cu_seqlens.empty()) {
      query_start.push_back(int32_t(T));
    } else {
      for (const int32_t boundary : cu_seqlens)
        if (boundary > b * T && boundary <= (b + 1) * T) query_start.push_back(int32_t(boundary - b * T));
    }
    const int64_t S = int64_t(query_start.size()) - 1;
    context_len.resize(size_t(S));
    int64_t W = 1;
    for (int64_t s = 0; s < S; ++s) {
      context_len[size_t(s)] = query_start[size_t(s) + 1] - query_start[size_t(s)];
      W = std::max<int64_t>(W, context_len[size_t(s)]);
    }
    // Document s's t-th token is block (= row) query_start[s] + t of the row's one-token-block cache.
    block_table.assign(size_t(S * W), 0);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < context_len[size_t(s)]; ++t) block_table[size_t(s * W + t)] = query_start[size_t(s)] + int32_t(t);
    auto cache = [&](TensorView x_NKD) {
      const TensorView row = x_NKD.slice(0, b * T, T);
      return TensorView(row.raw(), row.dtype(), {T, 1, K, D}, {row.stride(0), row.stride(0), row.stride(1), 1});
    };
    const kernels::PagedAttentionParams params{
        .query_start = query_start,
        .context_len = context_len,
        .block_table_SW = TensorView(block_table.data(), DType::i32, {S, W}),
        .lse_NH = lse_BHT.select(0, b).transpose(0, 1)};
    kernels.paged_attention_forward(params, q_NHD.slice(0, b * T, T), cache(k_NKD), cache(v_NKD),
                                    out_NHD.slice(0, b * T, T));
  }
}

}  // namespace rf::model
