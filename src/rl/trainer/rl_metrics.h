// The step's metrics with verl's names (spec verl.md §2.6), computed from the batch on the driver:
//   critic/score/{mean,max,min}, critic/rewards/...   per-response sums of token_level_scores / _rewards
//   critic/advantages/..., critic/returns/...         over the response tokens
//   critic/values/..., critic/vf_explained_var        with a critic: its values over the response tokens,
//                                                     and how much of the returns' variance they explain
//   response_length/{mean,max,min,clip_ratio}, prompt_length/...  (clip_ratio: share at the limit)
//   training/rollout_probs_diff_{max,mean,std}        |exp(rollout log-prob) - exp(old log-prob)| over
//                                                     the response tokens (verl's calculate_debug_metrics)
//   rollout/logprob_diff_max                          rlforge: max |rollout log-prob - old log-prob|
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

}  // namespace rf::rl
