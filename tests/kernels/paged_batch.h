// Test inputs for paged attention: logical sequences (a query, key and value row per position) and a
// builder that lays a call's sequences out in a fresh paged cache the way the rollout engine would,
// with the blocks in shuffled order among spare blocks of junk, so a kernel that reads the wrong
// block or past a context gets a wrong answer. Used by paged_attention_test.cpp and
// batch_invariance_test.cpp.
// Legend: T positions of a logical sequence, N query rows of a call, S sequences, W block-table width,
// P cache blocks, Z tokens per block, H query heads, K kv heads, D head dim.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "kernels/paged_attention.h"
#include "support/test_support.h"

namespace rf::kernels {

struct LogicalSequence {
  Tensor q_THD, k_TKD, v_TKD;
};

// T positions of random queries, keys and values in [-2, 2) (peaked enough that a masking slip shows).
inline LogicalSequence make_sequence(int64_t T, int64_t H, int64_t K, int64_t D, DType dtype, uint64_t seed) {
  return {rf::testing::random_tensor({T, H, D}, dtype, 3 * seed, -2.0, 2.0),
          rf::testing::random_tensor({T, K, D}, dtype, 3 * seed + 1, -2.0, 2.0),
          rf::testing::random_tensor({T, K, D}, dtype, 3 * seed + 2, -2.0, 2.0)};
}

// One sequence of a call: its first `context` positions are cached, and its queries are the last
// `q_len` of them.
struct SequenceCall {
  const LogicalSequence* sequence;
  int64_t context, q_len;
};

// A call's tensors: the cache (with the sequences' keys and values written), the queries, the block
// table and the query ranges, and an output prefilled with junk.
struct PagedBatch {
  Tensor k_cache_PZKD, v_cache_PZKD, q_NHD, out_NHD, block_table_SW;
  std::vector<int32_t> query_start, context_len;

  PagedAttentionParams params(double softmax_scale = 0.0) const {
    return {softmax_scale, query_start, context_len, block_table_SW};
  }
  // Sequence s's output rows.
  TensorView out_rows(size_t s) const { return out_NHD.view().slice(0, query_start[s], query_start[s + 1] - query_start[s]); }
};

inline PagedBatch build_paged_batch(const std::vector<SequenceCall>& calls, int64_t Z, uint64_t seed,
                                    int64_t num_spare_blocks = 3) {
  const LogicalSequence& any = *calls.front().sequence;
  const DType dtype = any.q_THD.dtype();
  const int64_t H = any.q_THD.size(1), K = any.k_TKD.size(1), D = any.k_TKD.size(2);
  const int64_t S = int64_t(calls.size());
  int64_t num_blocks = num_spare_blocks, W = 1, N = 0;
  for (const SequenceCall& c : calls) {
    num_blocks += (c.context + Z - 1) / Z;
    W = std::max(W, (c.context + Z - 1) / Z + 1);  // one column past the context: -1, never read
    N += c.q_len;
  }
  PagedBatch b;
  b.k_cache_PZKD = rf::testing::random_tensor({num_blocks, Z, K, D}, dtype, seed, 50.0, 60.0);
  b.v_cache_PZKD = rf::testing::random_tensor({num_blocks, Z, K, D}, dtype, seed + 1, 50.0, 60.0);
  b.out_NHD = rf::testing::random_tensor({N, H, D}, dtype, seed + 2, 5.0, 9.0);
  b.q_NHD = Tensor({N, H, D}, dtype);
  b.block_table_SW = Tensor({S, W}, DType::i32);
  std::fill_n(b.block_table_SW.data<int32_t>(), S * W, -1);
  std::vector<int32_t> block_ids(static_cast<size_t>(num_blocks));
  std::iota(block_ids.begin(), block_ids.end(), 0);
  std::shuffle(block_ids.begin(), block_ids.end(), std::mt19937_64(seed));
  size_t next_block = 0;
  b.query_start.push_back(0);
  for (int64_t s = 0; s < S; ++s) {
    const SequenceCall& c = calls[size_t(s)];
    int32_t* table_row = b.block_table_SW.data<int32_t>() + s * W;
    for (int64_t t = 0; t < c.context; ++t) {
      if (t % Z == 0) table_row[t / Z] = block_ids[next_block++];
      for (const auto& [src, dst] : {std::pair{&c.sequence->k_TKD, &b.k_cache_PZKD}, std::pair{&c.sequence->v_TKD, &b.v_cache_PZKD}})
        copy_convert(src->view().slice(0, t, 1),
                     dst->view().reshape({num_blocks * Z, K, D}).slice(0, table_row[t / Z] * Z + t % Z, 1));
    }
    copy_convert(c.sequence->q_THD.view().slice(0, c.context - c.q_len, c.q_len),
                 b.q_NHD.view().slice(0, b.query_start.back(), c.q_len));
    b.query_start.push_back(int32_t(b.query_start.back() + c.q_len));
    b.context_len.push_back(int32_t(c.context));
  }
  return b;
}

}  // namespace rf::kernels
