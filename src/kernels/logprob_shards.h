// The second step of the vocab-parallel log-prob (kernels/logprob.h): the shard statistics of all
// R tensor-parallel ranks, gathered in rank order, combined into the whole vocabulary's logp,
// entropy and lse. With M = max_r m_r and w_r = e^(m_r - M):
//   S = sum_r w_r s_r,  U = sum_r w_r (u_r + s_r (m_r - M)),  lse = M + log S,
//   entropy = log S - U / S,  logp = z_target - lse  (0 for a negative target),
// summed in rank order in f64, so every rank gets the same bits whatever the reduction order of
// the collective that gathered the statistics.
// Legend: N tokens, R ranks.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

// stats_RN4: [R, N, 4] in f32 or f64 (logprob_shard_stats' rows of every rank). targets_N: i32 or
// i64. logp_N, lse_N and entropy_N (optional: empty view) have the stats' dtype.
void combine_logprob_shards(TensorView stats_RN4, TensorView targets_N, TensorView logp_N, TensorView entropy_N,
                            TensorView lse_N);

}  // namespace rf::kernels
