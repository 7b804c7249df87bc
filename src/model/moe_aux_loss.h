// The MoE load-balancing losses (megatron.md §6.3), forward value and backward into the router's gate logits:
//   aux_loss (GShard/Switch, Megatron's `aux_loss`, micro-batch level), which with LoadFraction::of_tokens and the
//     counts pooled over layers is also Hugging Face's `load_balancing_loss_func` (Qwen2-MoE, Qwen3-MoE);
//   seq_aux_loss (DeepSeek-V2/V3): the same per packed sequence, then the mean over sequences;
//   z_loss (ST-MoE): the mean squared logsumexp of the logits.
// Not here: MPI. Where a statistic spans ranks the caller sums it, so each loss is used in three steps:
//   1. aux_loss_scores (the scores of all E experts), add_aux_topk_counts (this rank's column counts of map_aux);
//   2. the caller all-reduces the counts over the group that shares the tokens (tp-cp in Megatron), or sums them
//      over layers (HF's pooled loss);
//   3. *_forward gives this rank's (or layer's) share of the loss, *_backward adds its gradient into dlogits.
// The shares add up: summing a forward over the ranks (or layers) the counts were summed over gives the loss of all
// their rows, because only the local rows' scores appear in each share (Megatron's derivation).
// Not here either: the capacity (moe_capacity.h), the expert bias (moe_expert_bias.h), global_aux_loss (counts
// summed over tp-dp-cp and averaged over the micro-batches of the global batch: aux_loss's formula on those counts
// takes T as their mean token count, which is Megatron's T when every micro-batch has the same number of tokens).
//
// Formula. For the rows x of a sequence s (aux_loss: one sequence, all rows), with f_se the pooled count of expert e
// in map_aux (the top-k of the scores, unbiased, ungrouped, ties to the lower index), T_s the tokens those counts
// came from and S the number of sequences:
//   L = (1 / S) * sum_s coeff * E / (k * T_s^2) * sum_e f_se * sum_{x in s, local} scores[x, e]
// (no k with LoadFraction::of_tokens). T_s is sum_e f_se / k: every counted token chose exactly k experts, so the
// counts carry the token count and a masked or split batch cannot disagree with it (Megatron computes its T so when
// it has a padding mask). The gradient flows through the scores only, never through f (a choice has none).
// Scores: softmax over all E (softmax routers, whatever their pre_softmax), or sigmoid normalised to sum 1
// (s / (sum s + 1e-20), sigmoid routers).
//
// Packed sequences. Megatron's seq_aux_loss reshapes [s_l * b, E] to [s_l, b * E]: b sequences of equal length,
// each its own block of experts, then divides by b. rlforge packs documents THD-style, so a sequence is a range of
// rows (cu_seqlens-style `row_offsets`, S + 1 entries) and the per-sequence formula takes that sequence's own T_s;
// the mean is over the S sequences, each weighted equally whatever its length (equal lengths: Megatron's value).
// With context parallelism every rank holds a part of each sequence: it passes the offsets of its own rows of each,
// and the per-sequence counts are all-reduced over the group like the micro-batch counts.
//
// `valid_T` (u8, 1 = a real token; empty = every row) leaves padding rows out of counts, losses and gradients.
// All arithmetic in f64. Legend: T rows (tokens), E experts, S sequences, k = top_k.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "model/moe_router.h"

namespace rf::model {

// What the load fraction f_e is a fraction of: Megatron's T * k choices, or HF's T tokens.
enum class LoadFraction : uint8_t { of_choices, of_tokens };

struct AuxLossParams {
  double coeff = 0;  // moe_aux_loss_coeff (router_aux_loss_coef)
  int64_t top_k = 0;
  LoadFraction fraction = LoadFraction::of_choices;
};

struct ZLossParams {
  double coeff = 0;    // moe_z_loss_coeff
  double divisor = 1;  // Megatron: the tp-cp group size N, whose ranks each add a share of the mean
};

// scores_TE (f64, written): the normalised scores over all E experts of logits_TE (f32/f64).
void aux_loss_scores(RouterScore score, TensorView logits_TE, TensorView scores_TE);

// counts_E (+=, any numeric dtype; i64 or f64 sum exactly): how many valid rows have e among their top-k scores.
void add_aux_topk_counts(TensorView scores_TE, int64_t top_k, TensorView valid_T, TensorView counts_E);
// counts_SE (+=): the same per sequence, sequence s being rows [row_offsets[s], row_offsets[s + 1]).
void add_aux_topk_counts_per_sequence(TensorView scores_TE, int64_t top_k, std::span<const int64_t> row_offsets,
                                      TensorView valid_T, TensorView counts_SE);

// This share of aux_loss, from the local rows' scores and the pooled counts_E.
double aux_loss_forward(const AuxLossParams& params, TensorView scores_TE, TensorView valid_T, TensorView counts_E);
// dlogits_TE (+=, the dtype of logits_TE) scale * dL/dlogits (scale: the loss's gradient scale, e.g.
// 1 / num_microbatches, Megatron's AuxLossAutoScaler). Recomputes the scores from logits_TE (E values a row).
void aux_loss_backward(const AuxLossParams& params, RouterScore score, TensorView logits_TE, TensorView valid_T,
                       TensorView counts_E, double scale, TensorView dlogits_TE);

// seq_aux_loss with the pooled per-sequence counts_SE.
double seq_aux_loss_forward(const AuxLossParams& params, TensorView scores_TE, std::span<const int64_t> row_offsets,
                            TensorView valid_T, TensorView counts_SE);
void seq_aux_loss_backward(const AuxLossParams& params, RouterScore score, TensorView logits_TE,
                           std::span<const int64_t> row_offsets, TensorView valid_T, TensorView counts_SE, double scale,
                           TensorView dlogits_TE);

// L_z = coeff / divisor * mean over the valid rows of (logsumexp_e logits[x, e])^2; 0 without a valid row.
double z_loss_forward(const ZLossParams& params, TensorView logits_TE, TensorView valid_T);
// dlogits_TE += scale * dL_z/dlogits = scale * coeff / divisor * 2 lse_x softmax(logits_x) / num_valid.
void z_loss_backward(const ZLossParams& params, TensorView logits_TE, TensorView valid_T, double scale,
                     TensorView dlogits_TE);

}  // namespace rf::model
