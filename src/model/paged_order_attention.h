// The training attention's forward on the rollout's paged-attention kernel: a training batch's keys
// and values, as they lie in memory, seen as a KV cache of one-token blocks (a block table that lists
// each document's own rows), and every query of a document run as that document's prefill.
// Why: the rollout computes a token's attention in the paged kernel's fixed reduction order
// (kernels/paged_attention.h), the training kernel in flash-attention's tiles; f32 rounding then makes
// the trainer's recomputed log-probs differ from the rollout's by ~1e-5. With the trainer's forward in
// the paged kernel's order too (KernelRegistry::batch_invariant, the RL trainer's deterministic mode),
// the two engines compute the same bits for the same tokens. The kernel also writes the log-sum-exp the
// training backward (kernels/attention.h) recomputes its probabilities from.
// q and k are rotated already (RoPE applied, as the rollout writes them to its cache).
// Legend: B batch, T sequence, N = B * T tokens, H query heads, K kv heads, D head dim.
#pragma once

#include <span>
#include <vector>

#include "core/tensor_view.h"
#include "kernels/kernel_registry.h"

namespace rf::model {

// The kernel's per-row call arguments, kept by the caller between steps so that a training step does not
// allocate once their capacity has grown to the step's shape.
struct PagedOrderScratch {
  std::vector<int32_t> query_start, context_len, block_table;
};

// out_NHD, lse_BHT written. cu_seqlens: document boundaries on the N axis (kernels/attention.h);
// empty means each of the B rows is one document.
void attention_forward_paged_order(const kernels::KernelRegistry& kernels, std::span<const int32_t> cu_seqlens,
                                   int64_t B, int64_t T, TensorView q_NHD, TensorView k_NKD, TensorView v_NKD,
                                   TensorView out_NHD, TensorView lse_BHT, PagedOrderScratch& scratch);

}  // namespace rf::model
