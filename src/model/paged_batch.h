// What one forward over a paged KV cache reads: the rollout engine's step (engine/rollout), a mix of
// prefill chunks and decode tokens of S sequences, whose earlier tokens' keys and values are already
// in the cache (kernels/paged_attention.h has the addressing).
// Legend: N new tokens, S sequences, W block-table width, P cache blocks, Z tokens per block,
// K kv heads (per TP rank), D head dim.
#pragma once

#include <span>
#include <vector>

#include "core/tensor_view.h"

namespace rf::model {

struct PagedBatch {
  TensorView tokens_N;       // i64, sequence by sequence
  TensorView positions_N;    // i64: each token's position in its sequence
  TensorView slot_mapping_N;  // i64: where each token's key and value go in the cache
  std::span<const int32_t> query_start;  // [S + 1]: sequence s's tokens are rows [query_start[s], query_start[s+1])
  std::span<const int32_t> context_len;  // [S]: its tokens in the cache once these are written
  TensorView block_table_SW;             // i32
  // When given (i32 [N, L_moe, k]), the experts each MoE layer routed each new token to, in increasing order
  // (model_inputs.h's record_experts_NLk): the rollout's routing, which router replay R3 gives the trainer.
  TensorView record_experts_NLk;
  int64_t num_tokens() const { return tokens_N.numel(); }
};

// One layer's cache storage (KvBlockPool's keys(layer) and values(layer)): [P, Z, K, D].
struct PagedLayerCache {
  TensorView keys_PZKD, values_PZKD;
};

}  // namespace rf::model
