// Paged attention for the rollout engine (DESIGN §4): causal GQA attention of new tokens' queries
// against a KV cache kept in fixed-size blocks (vLLM's PagedAttention), and the write of new keys and
// values into that cache (vLLM's reshape_and_cache). Inference only: there is no backward.
//
// The cache of one layer is k_cache_PZKD and v_cache_PZKD: P blocks of Z tokens (KvBlockPool's
// storage). Sequence s of a call owns the blocks listed in row s of block_table_SW, in order: its
// logical token t lives in block block_table_SW[s, t / Z] at slot t % Z. Its queries are rows
// [query_start[s], query_start[s+1]) of q_NHD, the last q_len = query_start[s+1] - query_start[s] of
// its context_len[s] tokens (their keys and values already written to the cache), so its query i
// sits at position p = context_len[s] - q_len + i and sees the cache positions 0..p:
//   out[n, h] = sum_{t <= p} softmax_t(scale * q[n, h] . k[s, t, h / G]) v[s, t, h / G],  G = H / K.
// One call mixes prefill chunks (q_len > 1, starting anywhere in a sequence) and decode steps
// (q_len = 1), as continuous batching schedules them.
//
// Batch invariance (issue #7): a query row's result depends only on its own query, its position and
// its sequence's cached keys and values, never on the other rows of the call (other queries of its
// sequence, other sequences), the block size or where the blocks lie, nor on the thread count. Both
// the ref and the cpu kernel reduce over positions in ascending order with a fixed arithmetic
// (paged_attention.cpp of each says which), so a token's output is bitwise the same whether it is
// computed in a prefill chunk, a decode step or alone.
// Legend: N query rows (new tokens of all sequences), S sequences, W block-table width (blocks per
// sequence at most), P cache blocks, Z tokens per block, H query heads, K kv heads, D head dim.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor_view.h"

namespace rf::kernels {

struct PagedAttentionParams {
  double softmax_scale = 0.0;            // 0: 1 / sqrt(D)
  std::span<const int32_t> query_start;  // [S + 1]: 0, ..., N, non-decreasing
  std::span<const int32_t> context_len;  // [S]: cached tokens of each sequence, its new ones included
  TensorView block_table_SW;             // i32 [S, W], unit inner stride; W * Z >= every context_len
  // Optional output (empty: not written): lse_NH[n, h] = log sum_{t <= p} exp(scale * q[n, h] . k[s, t, h / G]),
  // the natural log-sum-exp of the row's scaled scores, f32 (f64 for f64 q), any strides. The
  // training attention's backward (kernels/attention.h) recomputes the probabilities from it, so a
  // training forward can run on this kernel (model/attention_block.cpp, batch-invariant mode).
  TensorView lse_NH;
};

// q_NHD, out_NHD: f32, bf16 or f64 (the cpu kernels: f32 and bf16), unit inner stride; k_cache_PZKD and
// v_cache_PZKD in q's dtype with a unit inner stride. out is overwritten; it must not alias q or the
// cache. Products and sums in f32 for f32 and bf16 (f64 in ref), out rounded once.
using PagedAttentionForward = void(const PagedAttentionParams&, TensorView q_NHD, TensorView k_cache_PZKD,
                                   TensorView v_cache_PZKD, TensorView out_NHD);
using PagedAttentionForwardFn = PagedAttentionForward*;

// k_cache_PZKD[slot / Z, slot % Z] = k_NKD[n] and the same for v, for slot = slot_mapping_N[n]
// (= block * Z + offset); a negative slot skips its row (a padding token). k_NKD and v_NKD in the
// cache's dtype with a unit inner stride (views into a fused qkv buffer work); slot_mapping_N i32 or
// i64. Two rows with the same slot: the later one wins.
using KvCacheWrite = void(TensorView k_NKD, TensorView v_NKD, TensorView slot_mapping_N, TensorView k_cache_PZKD,
                          TensorView v_cache_PZKD);
using KvCacheWriteFn = KvCacheWrite*;

}  // namespace rf::kernels
