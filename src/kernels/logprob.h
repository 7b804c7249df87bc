// Softmax cross-entropy fused with the per-token outputs RL needs: with z = logits / temperature,
//   logp[n]    = z[n, target[n]] - lse(z[n]),          (the negative cross-entropy)
//   entropy[n] = lse(z[n]) - sum_v softmax(z[n])_v z[n, v].
// A negative target (HF's ignore_index -100) gives logp 0 and no gradient through logp.
// Backward, with p = softmax(z):
//   dz_v = dlogp (1[v = target] - p_v)  -  dentropy p_v (z_v - lse + entropy),
//   dlogits = dz / temperature.
//
// Vocab-parallel (Megatron §2.5): a tensor-parallel rank holds the columns [vocab_start,
// vocab_start + V) of a vocabulary padded to a multiple of the TP size; columns at or past
// `vocab_size` (the real vocabulary) are padding, masked to -inf: they take no probability and get
// no gradient. The forward is then two steps around one collective:
//   1. logprob_shard_stats: per token, over this rank's real columns, the max m, sum e^(z-m),
//      sum e^(z-m) (z-m), and z[target] if this rank holds the target (else -inf);
//   2. all-gather the stats over TP, then combine_logprob_shards (logprob_shards.h), the same
//      arithmetic on every rank in rank order, gives logp, entropy and lse of the whole vocabulary.
// (One all-gather of 4 values per token and rank instead of Megatron's three all-reduces; every rank
// ends with identical bits.) The backward needs no collective: logprob_backward on the shard with the
// global lse and entropy.
// logprob_forward is the one-pass kernel for a whole, unpadded vocabulary (vocab_start 0,
// vocab_size V or 0).
// Legend: N tokens, V vocab (columns held here), R tensor-parallel ranks.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

struct LogprobParams {
  double temperature = 1.0;
  int64_t vocab_start = 0;  // the vocabulary id of these logits' first column
  int64_t vocab_size = 0;   // the real vocabulary (0: vocab_start + V, no padding); targets must be below it
};

// Per-token statistics of one shard (the columns stats_N4 holds, in this order).
enum LogprobShardStat : int64_t { kShardMax = 0, kShardSumExp = 1, kShardSumExpDelta = 2, kShardTarget = 3 };
inline constexpr int64_t kNumShardStats = 4;

// logits_NV: f32, bf16 or f64. targets_N: i32 or i64. logp_N, lse_N (saved for backward) and
// entropy_N (optional: empty view = not computed) are f32 (f64 for f64 logits).
using LogprobForward = void(const LogprobParams&, TensorView logits_NV, TensorView targets_N,
                                  TensorView logp_N, TensorView entropy_N, TensorView lse_N);
using LogprobForwardFn = LogprobForward*;
// stats_N4: f32 (f64 for f64 logits), written; rows of a shard with no real column are
// (-inf, 0, 0, -inf).
using LogprobShardStats = void(const LogprobParams&, TensorView logits_NV, TensorView targets_N,
                                     TensorView stats_N4);
using LogprobShardStatsFn = LogprobShardStats*;
// dlogits_NV is overwritten (dtype of logits). dentropy_N may be empty (no entropy term); then
// entropy_N is not read. lse_N and entropy_N are those of the whole vocabulary.
using LogprobBackward = void(const LogprobParams&, TensorView logits_NV, TensorView targets_N,
                                   TensorView lse_N, TensorView entropy_N, TensorView dlogp_N,
                                   TensorView dentropy_N, TensorView dlogits_NV);
using LogprobBackwardFn = LogprobBackward*;

}  // namespace rf::kernels
