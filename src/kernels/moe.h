// Mixture-of-Experts kernels (spec/megatron.md §6.6, §6.7): the token permutation that groups routed
// tokens by expert, its inverse combine, and the grouped GEMM that runs every local expert's linear
// layer in one call. The router, the dispatchers' communication and the expert MLP are not here.
// Legend: N tokens, C hidden, E experts (local experts for the grouped GEMM), J routed rows
// (num_out: the number of set entries of the routing map, N * topk when nothing is dropped),
// I in-features, O out-features of one expert's linear layer.
//
// Forward and backward of the permutation:
//   forward   permute:   permuted_JC[j] = tokens_NC[sorted_indices_J[j]]
//             unpermute: out_NC[n] = sum over j with sorted_indices_J[j] == n of y_JC[j]
//   backward  of permute   = unpermute of the row gradients (a token's gradient sums its copies);
//             of unpermute = gather (each row gets its token's gradient).
// The gradient of permuted_probs_J (when the probs are multiplied in the expert, §6.7) goes back to
// probs_NE at (sorted_indices_J[j], expert of j), the expert of j being read off tokens_per_expert_E;
// that [J] scatter is the router's, not a kernel.
//
// Grouped GEMM: group_sizes_E (host counts, summing to N) split the rows of x into consecutive
// groups, group e multiplied by expert e's weight w_EOI[e] (the linear convention, out x in):
//   forward  y_NO[rows of e] = x_NI[rows of e] w_EOI[e]^T
//   dgrad    dx_NI[rows of e] (= or +=) dy_NO[rows of e] w_EOI[e]
//   wgrad    dw_EOI[e] (= or +=) dy_NO[rows of e]^T x_NI[rows of e]
// Empty groups are allowed: their weight gradient is zeroed (overwrite) or left alone (add).
//
// Dtypes: tokens, rows and weights f32, bf16 or f64 (ref only), one dtype per call; dw is f32 for
// f32/bf16 compute and f64 for f64 (as linear_wgrad). routing_map_NE boolean or u8, probs f32,
// sorted_indices i32 or i64, tokens_per_expert i64. Unpermute sums a token's rows (after out's value
// in add mode) in f32 (f64 in ref) in increasing j, whatever the thread count, and rounds once.
// The cpu grouped GEMM cuts every expert's product into tiles fixed by the shapes alone (kernels/cpu/
// grouped_tiles.h) and computes each tile on one thread on the dtype's GEMM engine, its whole K in one product
// (never split), all the experts' tiles in one parallel region. Its bits therefore do not depend on the
// thread count on any engine. On the ordered GEMM (the batch-invariant registry's) they are those of one
// linear call per expert, whose contract does not depend on M, N or the tiling; on oneDNN and OpenBLAS
// they are the engine's single-threaded bits on each tile, which may differ from one threaded linear call
// per expert in the rounding of a reordered sum (within the linear layers' tolerances against ref).
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor_view.h"
#include "kernels/accumulate.h"

namespace rf::kernels {

// Expert-major stable order (expert 0's tokens ascending, then expert 1's, ...):
// sorted_indices_J[j] = the source token of row j, tokens_per_expert_E[e] = column sums of the map,
// permuted_JC[j] = tokens_NC[sorted_indices_J[j]], permuted_probs_J[j] = probs_NE at that entry.
// J must equal the number of set entries of the map. probs_NE and permuted_probs_J may both be
// empty (the probs are then not permuted).
using MoePermute = void(TensorView tokens_NC, TensorView routing_map_NE, TensorView probs_NE, TensorView permuted_JC,
                        TensorView permuted_probs_J, TensorView sorted_indices_J, TensorView tokens_per_expert_E);
using MoePermuteFn = MoePermute*;
// out_NC (= or +=, mode) the sum of the rows y_JC[j] with sorted_indices_J[j] == n; a token no row
// names gets 0 (overwrite) or keeps its value (add). The probs are not applied (§6.6).
using MoeUnpermute = void(TensorView y_JC, TensorView sorted_indices_J, TensorView out_NC, Accumulate mode);
using MoeUnpermuteFn = MoeUnpermute*;
// y_JC[j] = x_NC[sorted_indices_J[j]]: the row copy of permute, and the backward of unpermute.
using MoeGather = void(TensorView x_NC, TensorView sorted_indices_J, TensorView y_JC);
using MoeGatherFn = MoeGather*;

using GroupedGemmForward = void(TensorView x_NI, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                                TensorView y_NO);
using GroupedGemmForwardFn = GroupedGemmForward*;
using GroupedGemmDgrad = void(TensorView dy_NO, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                              TensorView dx_NI, Accumulate mode);
using GroupedGemmDgradFn = GroupedGemmDgrad*;
using GroupedGemmWgrad = void(TensorView dy_NO, TensorView x_NI, std::span<const int64_t> group_sizes_E,
                              TensorView dw_EOI, Accumulate mode);
using GroupedGemmWgradFn = GroupedGemmWgrad*;

// The routing half of permute, shared by every variant (a sequential scan of the map, O(N E) and
// negligible next to the row copy): sorted_indices_J, tokens_per_expert_E and permuted_probs_J (when
// given) as in MoePermute. Arguments checked by the caller.
void moe_sort_by_expert(TensorView routing_map_NE, TensorView probs_NE, TensorView sorted_indices_J,
                        TensorView permuted_probs_J, TensorView tokens_per_expert_E);

}  // namespace rf::kernels
