// Balancing samples of unequal length across DP ranks and micro-batches (verl's seqlen_balancing.py).
//
// balanced_partitions is the Karmarkar-Karp largest differencing method (LDM) for k-way number
// partitioning: start from one partial solution per item (or, for equal sizes, per k consecutive items
// in sorted order, one in each part), then repeatedly take the two partial solutions with the largest
// spread (max part - min part) and merge them so that the largest part of one joins the smallest of the
// other. Its largest part is at most (4/3 - 1/(3k)) of the optimum (Michiels et al. 2007), and it
// leaves no part empty when there are at least k items. The result is a function of the values alone.
//
// A sample's cost is verl's workload estimate 24576·L + L² (FLOPs of a 7B dense block, up to a factor:
// the linear layers' 12·C² per token plus attention's 2·C·L per token, with C = 4096).
//
// Dimension legend: B batch (samples).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf::rl {

int64_t sequence_workload(int64_t num_tokens);

// Whether every part gets B / k items (verl's equal_size).
enum class PartSizes : uint8_t { equal, any };

// k parts of the indices 0..n-1 of `values`, each part's indices ascending, balancing the sums.
// Needs 1 <= k <= n, and k dividing n for PartSizes::equal.
std::vector<std::vector<int64_t>> balanced_partitions(std::span<const int64_t> values, int64_t num_parts,
                                                      PartSizes sizes);

// verl's _balance_batch: the order in which to lay out the controller's batch so that the contiguous
// chunks a DP dispatch cuts carry balanced workloads. `seqlens_B` are the samples' token counts (the
// attention mask's row sums); dp_size must divide B. Within a rank's chunk the samples run lightest
// first, the even-ranked ones ascending and then the odd-ranked ones descending, so that light samples
// sit at both ends (smaller pipeline bubbles when the chunk is cut into micro-batches in order).
std::vector<int64_t> balance_batch_order(std::span<const int64_t> seqlens_B, int64_t dp_size);

}  // namespace rf::rl
