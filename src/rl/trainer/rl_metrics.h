// The step's metrics with verl's names (spec verl.md §2.6), computed from the batch on the driver:
//   critic/score/{mean,max,min}, critic/rewards/...   per-response sums of token_level_scores / _rewards
//   critic/advantages/..., critic/returns/...         over the response tokens
//   critic/values/..., critic/vf_explained_var        with a critic: its values over the response tokens,
//                                                     and how much of the returns' variance they explain
//   response_length/{mean,max,min,clip_ratio}, prompt_length/...  (clip_ratio: share at the limit)
//   training/rollout_probs_diff_{max,mean,std}        |exp(rollout log-prob) - exp(old log-prob)| over
//                                                     the response tokens (verl's calculate_debug_metrics)
//   rollout/logprob_diff_max                          rlforge: max |rollout log-prob - old log-prob|
//   moe/routing_agreement, moe/replay_routing_match   rlforge, MoE: the share of tokens every MoE layer of the
//                                                     old-log-prob pass routed as the rollout did (without replay:
//                                                     the natural agreement; with R2 / R3: what the update uses)
//   moe/load_imbalance, moe/tokens_per_expert/{min,max}, moe/dropped_tokens   rlforge, MoE: the old-log-prob pass's
//                                                     expert load (max over experts of tokens / mean, averaged over
//                                                     MoE layers; min and max over layers and experts; dropped: 0
//                                                     when dropless, else the actor update's count of the (token,
//                                                     expert) pairs its capacity dropped); rollout/moe/... the
//                                                     rollout's (dropless)
#pragma once

#include <map>
#include <string>

#include "rl/trainer/rl_batch.h"
#include "trainer/run_loop.h"

namespace rf::rl {

using Metrics = trainer::Metrics;

Metrics data_metrics(const RlBatch& batch, int64_t max_prompt_length, int64_t max_response_length);
// Needs rollout_log_probs and old_log_probs on every response.
Metrics rollout_diff_metrics(const RlBatch& batch);
// verl's balance_batch metrics over `dp_size` ranks (trainer.balance_batch): global_seqlen/{min,max,
// minmax_diff} are the token sums of the contiguous shares the batch would split into, balanced_{min,max}
// those of the balanced shares (dp_shares), mean the sum over the ranks.
Metrics seqlen_balance_metrics(const RlBatch& batch, int64_t dp_size);
// MoE routing metrics (above) over the responses whose rollout_experts / old_experts are recorded (the old-log-prob
// pass's records stay on the actor's DP rank that made them: with several, the logging rank's share). `replay`: the
// old-log-prob pass's routing is what the update uses (R2, R3), so its agreement is logged as replay_routing_match;
// `natural`: it routed freely (disabled, R2), so as routing_agreement.
struct RoutingShape {
  int64_t num_moe_layers = 0, top_k = 0, num_experts = 0;
  // The actor's experts take every token (no moe_expert_capacity_factor): its moe/dropped_tokens is 0. Otherwise the
  // actor update's engine counts the pairs its capacity dropped (TrainEngine's moe/dropped_tokens).
  bool actor_dropless = true;
};
Metrics moe_routing_metrics(const RlBatch& batch, const RoutingShape& shape, bool replay, bool natural);

}  // namespace rf::rl
