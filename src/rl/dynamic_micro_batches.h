// Dynamic micro-batches by token budget (verl's use_dynamic_bsz with ppo_max_token_len_per_gpu /
// log_prob_max_token_len_per_gpu): a DP rank's samples are cut into micro-batches whose token counts
// each stay within the budget, with as few micro-batches as the partitioning finds and the same number on
// every rank of the DP group (Megatron's schedule runs one count on every rank; verl all-reduces it).
//
// How: start from M = ceil(tokens / budget), the fewest any cut could have; split the samples into M parts
// with balanced workloads (balanced_partitions on 24576·L + L², as verl does); if a part exceeds the
// budget, try M + 1. The ranks agree on the largest of their counts by an all-reduce (max) and re-check
// at that count, until all fit at one count. verl stops at the first M and can exceed the budget (three
// samples of 6 tokens under a budget of 9 give M = 2 and a part of 12); here the budget is a guarantee.
// M = B always fits (one sample per part), because no sample may exceed the budget.
// Micro-batches then run heaviest in the middle: sorted by workload, the even-ranked ones in reverse
// followed by the odd-ranked ones (verl's use_dynamic_bsz_balance: light micro-batches at both ends
// shorten the pipeline's warm-up and cool-down).
//
// Dimension legend: B batch (samples), M micro-batches.
#pragma once

#include <span>
#include <vector>

#include "dist/process_group.h"

namespace rf::rl {

// The sample indices of each micro-batch in running order, each list ascending. Collective over `dp`.
// seqlens_B are this rank's samples' token counts; max_token_len (the budget, already multiplied by CP
// where the caller uses CP) must cover the longest sample.
std::vector<std::vector<int64_t>> make_dynamic_micro_batches(std::span<const int64_t> seqlens_B,
                                                              int64_t max_token_len, dist::ProcessGroup& dp);

}  // namespace rf::rl
