// RlBatch: one training step's responses and what the step computes for them, verl's DataProto
// after `batch.repeat(n, interleave=True).union(gen_output)` (spec verl.md §2.3): response i belongs to
// prompt i / n (its uid group), so the n responses of a prompt are adjacent.
// Per response the per-token columns hold one value per response token (response_mask is 1 on every
// generated token, eos included, as verl's attention mask makes it).
//
// The engines take packed micro-batches (engine/tensor_map.h): response i is the document
// prompt + response, position n carries the label tokens[n + 1], so response token t is predicted at
// position prompt_len + t - 1, where its columns go (rl/actor_loss.h). make_micro_batch packs a list
// of responses that way; read_token_column reads a per-position output back into a response column.
// Legend: B responses, T the longest response (the (B, T) matrices of verl's algorithms).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "engine/tensor_map.h"

namespace rf::rl {

struct RlResponse {
  int64_t group = 0;                 // the prompt's index in the step: verl's uid
  std::vector<int64_t> prompt;       // token ids
  std::vector<int64_t> response;     // generated ids, ending with eos when it stopped
  bool truncated = false;            // stopped by the length limit
  std::vector<float> rollout_log_probs;  // the rollout engine's, at the sampling temperature
  double score = 0;                  // the reward function's scalar
  double reward_baseline = 0;        // remax: the score of its prompt's greedy response
  std::map<std::string, double> reward_extra;  // e.g. acc
  // Per response token, filled by the step's stages.
  std::vector<float> old_log_probs, entropy, ref_log_prob, values, token_level_rewards, advantages, returns;
  // MoE models, per token of prompt + response (model/model_inputs.h's replay format, i32 [T, L_moe, k] flattened;
  // a row of -1: no record, the router chooses): the rollout's routing (the last token's row -1: it never ran) and
  // the old-log-prob pass's (router replay, rl_roles.h).
  std::vector<int32_t> rollout_experts, old_experts;
};

using RlBatch = std::vector<RlResponse>;

// Which per-token columns of the responses go into a micro-batch, next to input_ids, position_ids,
// labels, loss_mask and cu_seqlens.
enum class LossColumns : uint8_t { none, actor, critic };

// Responses `indices` of `batch` packed into one micro-batch. With LossColumns::actor it carries
// old_log_probs and advantages (and ref_log_prob when `with_ref`), as rl/actor_loss.h reads them; with
// LossColumns::critic values and returns, as rl/critic_loss.h reads them (`with_ref` unread).
engine::TensorMap make_micro_batch(const RlBatch& batch, const std::vector<int64_t>& indices, LossColumns columns,
                                   bool with_ref);

// MoE router replay and recording (engine/tensor_map.h) on a micro-batch made from `indices` by make_micro_batch:
// "replay_experts" from each response's `column` (RlResponse::rollout_experts or old_experts), "record_experts"
// [N, num_moe_layers, top_k] for the forward to fill; read_recorded_experts copies the latter back into `column`.
void add_replay_experts(engine::TensorMap& mb, const RlBatch& batch, const std::vector<int64_t>& indices,
                        std::vector<int32_t> RlResponse::*column, int64_t num_moe_layers, int64_t top_k);
void add_record_experts(engine::TensorMap& mb, int64_t num_moe_layers, int64_t top_k);
void read_recorded_experts(RlBatch& batch, const std::vector<int64_t>& indices, const engine::TensorMap& mb,
                           std::vector<int32_t> RlResponse::*column);

// Cuts `indices` (this DP rank's share of a pass) into micro-batches: of `responses_per_micro_batch`
// responses in order, or, when `max_tokens` > 0 (use_dynamic_bsz), by tokens: each micro-batch within
// max_tokens x cp_size, each response counted as context parallel pads it (engine/local_micro_batch.h), balanced
// by workload, the same count on every rank of `dp` (rl/dynamic_micro_batches.h; collective over `dp` then).
// Every response must fit (the config checks prompt + response length against max_tokens).
std::vector<std::vector<int64_t>> split_micro_batches(const RlBatch& batch, const std::vector<int64_t>& indices,
                                                      int64_t responses_per_micro_batch, int64_t max_tokens,
                                                      int64_t cp_size, dist::ProcessGroup& dp);

// The per-position column `values_N` of a micro-batch made from `indices`, read back into the
// responses' per-token `column` (e.g. &RlResponse::old_log_probs).
void read_token_column(RlBatch& batch, const std::vector<int64_t>& indices, TensorView values_N,
                       std::vector<float> RlResponse::*column);

// The (B, T) f32 matrix of a per-token column (0 past each response's end) and of the response mask.
Tensor column_matrix(const RlBatch& batch, std::vector<float> RlResponse::*column);
Tensor response_mask_matrix(const RlBatch& batch);
// Writes row b of values_BT (its first response-length entries) into response b's column.
void store_column(RlBatch& batch, TensorView values_BT, std::vector<float> RlResponse::*column);

// Part `part` of `n` items cut into `parts` contiguous runs, the first n % parts runs one item longer:
// [first, first + count).
struct ContiguousShare {
  int64_t first, count;
};
ContiguousShare contiguous_share(int64_t n, int64_t parts, int64_t part);

// How a pass over responses `indices` splits among `dp_size` data-parallel ranks: the contiguous shares
// (contiguous_share), or with `balance` (trainer.balance_batch) and
// dp_size dividing the count, equal-size shares whose token workloads (verl's 24576·L + L²) are balanced by
// Karmarkar-Karp (rl/seqlen_balancing.h), each in the order of `indices`. Share r is rank r's.
std::vector<std::vector<int64_t>> dp_shares(const RlBatch& batch, std::span<const int64_t> indices, int64_t dp_size,
                                            bool balance);

int64_t longest_response(const RlBatch& batch);
int64_t num_tokens(const RlResponse& r);  // prompt + response

}  // namespace rf::rl
