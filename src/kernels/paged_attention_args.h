// Shared by the ref and cpu paged-attention kernels, so both reject exactly the same calls: shapes,
// dtypes and layouts, the query ranges and context lengths, and every block-table entry a sequence's
// context reaches (an id outside the cache would read or write another process's memory, so it is
// checked once per call, outside the hot loops). Also the address of a token's cache row. In an
// unnamed namespace for the reason given in attention_args.h.
// Legend: N query rows, S sequences, W block-table width, P cache blocks, Z tokens per block,
// H query heads, K kv heads, D head dim.
#pragma once

#include <cmath>

#include "kernels/paged_attention.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels {
namespace {

struct PagedAttentionDims {
  int64_t N, S, H, K, D, P, Z;
  double scale;  // softmax_scale resolved (0 -> 1 / sqrt(D))
};

// Element offset of logical token t of a sequence (its block-table row) in a cache view.
inline int64_t cache_row_offset(const TensorView& cache_PZKD, const int32_t* table_row, int64_t Z, int64_t t,
                                int64_t kv) {
  return table_row[t / Z] * cache_PZKD.stride(0) + (t % Z) * cache_PZKD.stride(1) + kv * cache_PZKD.stride(2);
}

inline void check_cache(const TensorView& cache_PZKD, const TensorView& like, DType dtype, const char* what) {
  check_rank(cache_PZKD, 4, what);
  check_shape(cache_PZKD, like.shape(), what);
  check_dtype(cache_PZKD, dtype, what);
  check_unit_inner_stride(cache_PZKD, what);
}

inline PagedAttentionDims check_paged_attention_args(const PagedAttentionParams& p, const TensorView& q_NHD,
                                                     const TensorView& k_cache_PZKD, const TensorView& v_cache_PZKD,
                                                     const TensorView& out_NHD) {
  check_rank(q_NHD, 3, "paged_attention q_NHD");
  check_floating(q_NHD, "paged_attention q_NHD");
  check_unit_inner_stride(q_NHD, "paged_attention q_NHD");
  check_shape(out_NHD, q_NHD.shape(), "paged_attention out_NHD");
  check_dtype(out_NHD, q_NHD.dtype(), "paged_attention out_NHD");
  check_unit_inner_stride(out_NHD, "paged_attention out_NHD");
  check_cache(k_cache_PZKD, k_cache_PZKD, q_NHD.dtype(), "paged_attention k_cache_PZKD");
  check_cache(v_cache_PZKD, k_cache_PZKD, q_NHD.dtype(), "paged_attention v_cache_PZKD");
  const int64_t N = q_NHD.size(0), H = q_NHD.size(1), D = q_NHD.size(2);
  const int64_t P = k_cache_PZKD.size(0), Z = k_cache_PZKD.size(1), K = k_cache_PZKD.size(2);
  RF_CHECK(k_cache_PZKD.size(3) == D, "paged_attention: q_NHD has head dim {} but the cache {}", D,
           k_cache_PZKD.size(3));
  RF_CHECK(K > 0 && H % K == 0, "paged_attention: {} query heads are not a multiple of {} kv heads", H, K);
  RF_CHECK(Z > 0, "paged_attention: the cache's block size is 0");

  const int64_t S = int64_t(p.context_len.size());
  RF_CHECK(p.query_start.size() == size_t(S + 1),
           "paged_attention: query_start needs S + 1 = {} entries for {} context lengths, got {}", S + 1, S,
           p.query_start.size());
  RF_CHECK(p.query_start.front() == 0 && p.query_start.back() == N,
           "paged_attention: query_start must run from 0 to N = {}, got {} .. {}", N, p.query_start.front(),
           p.query_start.back());
  const TensorView& table = p.block_table_SW;
  check_rank(table, 2, "paged_attention block_table_SW");
  RF_CHECK(table.dtype() == DType::i32, "paged_attention block_table_SW: expected i32, got {}",
           dtype_name(table.dtype()));
  RF_CHECK(table.size(0) == S, "paged_attention block_table_SW: expected {} rows (one per sequence), got {}", S,
           table.describe());
  check_unit_inner_stride(table, "paged_attention block_table_SW");
  const int64_t W = table.size(1);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q_len = int64_t(p.query_start[size_t(s) + 1]) - p.query_start[size_t(s)];
    const int64_t context = p.context_len[size_t(s)];
    RF_CHECK(q_len >= 0, "paged_attention: query_start decreases at sequence {} ({} then {})", s,
             p.query_start[size_t(s)], p.query_start[size_t(s) + 1]);
    RF_CHECK(q_len <= context, "paged_attention: sequence {} has {} queries but a context of only {} tokens", s,
             q_len, context);
    RF_CHECK(context <= W * Z, "paged_attention: sequence {}'s context of {} tokens needs {} blocks, the table has {}",
             s, context, (context + Z - 1) / Z, W);
    const int32_t* row = table.data<int32_t>() + s * table.stride(0);
    for (int64_t b = 0; b < (context + Z - 1) / Z; ++b)
      RF_CHECK(row[b] >= 0 && row[b] < P, "paged_attention: block_table_SW[{}, {}] = {} is not a block of the cache "
               "(it has {})", s, b, row[b], P);
  }
  if (!p.lse_NH.empty()) {
    check_shape(p.lse_NH, {N, H}, "paged_attention lse_NH");
    check_dtype(p.lse_NH, q_NHD.dtype() == DType::f64 ? DType::f64 : DType::f32, "paged_attention lse_NH");
  }
  const double scale = p.softmax_scale != 0.0 ? p.softmax_scale : 1.0 / std::sqrt(double(D));
  return {N, S, H, K, D, P, Z, scale};
}

// Slot of row n (i32 or i64); negative for a row to skip.
inline int64_t slot_of(const TensorView& slot_mapping_N, int64_t n) {
  const int64_t at = n * slot_mapping_N.stride(0);
  return slot_mapping_N.dtype() == DType::i32 ? slot_mapping_N.data<int32_t>()[at]
                                              : slot_mapping_N.data<int64_t>()[at];
}

// Returns the number of rows N.
inline int64_t check_kv_cache_write_args(const TensorView& k_NKD, const TensorView& v_NKD,
                                         const TensorView& slot_mapping_N, const TensorView& k_cache_PZKD,
                                         const TensorView& v_cache_PZKD) {
  check_rank(k_cache_PZKD, 4, "kv_cache_write k_cache_PZKD");
  check_floating(k_cache_PZKD, "kv_cache_write k_cache_PZKD");
  const DType dtype = k_cache_PZKD.dtype();
  check_cache(k_cache_PZKD, k_cache_PZKD, dtype, "kv_cache_write k_cache_PZKD");
  check_cache(v_cache_PZKD, k_cache_PZKD, dtype, "kv_cache_write v_cache_PZKD");
  check_ids(slot_mapping_N, "kv_cache_write slot_mapping_N");
  check_rank(slot_mapping_N, 1, "kv_cache_write slot_mapping_N");
  const int64_t N = slot_mapping_N.size(0);
  const int64_t K = k_cache_PZKD.size(2), D = k_cache_PZKD.size(3);
  for (const TensorView* x : {&k_NKD, &v_NKD}) {
    check_shape(*x, {N, K, D}, "kv_cache_write k_NKD / v_NKD");
    check_dtype(*x, dtype, "kv_cache_write k_NKD / v_NKD");
    check_unit_inner_stride(*x, "kv_cache_write k_NKD / v_NKD");
  }
  const int64_t num_slots = k_cache_PZKD.size(0) * k_cache_PZKD.size(1);
  for (int64_t n = 0; n < N; ++n)
    RF_CHECK(slot_of(slot_mapping_N, n) < num_slots, "kv_cache_write: slot_mapping_N[{}] = {} is past the cache's {} "
             "slots", n, slot_of(slot_mapping_N, n), num_slots);
  return N;
}

}  // namespace
}  // namespace rf::kernels
