#include "rl/dynamic_micro_batches.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "rl/seqlen_balancing.h"

namespace rf::rl {
namespace {

using Partition = std::vector<std::vector<int64_t>>;

constexpr double kCannot = std::numeric_limits<double>::infinity();  // a rank's proposal when no count fits

int64_t tokens_of(const std::vector<int64_t>& part, std::span<const int64_t> seqlens) {
  int64_t tokens = 0;
  for (int64_t i : part) tokens += seqlens[size_t(i)];
  return tokens;
}

// The balanced split into `count` parts if every part fits the budget.
std::optional<Partition> split_within_budget(std::span<const int64_t> seqlens, std::span<const int64_t> workloads,
                                             int64_t count, int64_t max_token_len) {
  if (count > int64_t(seqlens.size())) return std::nullopt;
  if (count == 0) return Partition{};  // only an empty batch gets here
  Partition parts = balanced_partitions(workloads, count, PartSizes::any);
  for (const std::vector<int64_t>& part : parts)
    if (tokens_of(part, seqlens) > max_token_len) return std::nullopt;
  return parts;
}

// Heaviest in the middle: by workload descending, then the even positions reversed and the odd ones.
Partition running_order(Partition parts, std::span<const int64_t> workloads) {
  const auto workload_of = [&](const std::vector<int64_t>& part) {
    int64_t sum = 0;
    for (int64_t i : part) sum += workloads[size_t(i)];
    return std::pair(sum, part.front());
  };
  std::sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) { return workload_of(a) > workload_of(b); });
  Partition even_ranked, odd_ranked;
  for (size_t i = 0; i < parts.size(); ++i) (i % 2 == 0 ? even_ranked : odd_ranked).push_back(std::move(parts[i]));
  std::reverse(even_ranked.begin(), even_ranked.end());
  for (std::vector<int64_t>& part : odd_ranked) even_ranked.push_back(std::move(part));
  return even_ranked;
}

}  // namespace

std::vector<std::vector<int64_t>> make_dynamic_micro_batches(std::span<const int64_t> seqlens_B,
                                                              int64_t max_token_len, dist::ProcessGroup& dp) {
  const auto B = int64_t(seqlens_B.size());
  int64_t total = 0, longest = 0;
  std::vector<int64_t> workloads;
  for (int64_t length : seqlens_B) {
    RF_CHECK(length >= 0, "seqlens_B: expected token counts >= 0, got {}", length);
    total += length;
    longest = std::max(longest, length);
    workloads.push_back(sequence_workload(length));
  }
  RF_CHECK(max_token_len >= 1, "max_token_len: expected >= 1, got {}", max_token_len);
  RF_CHECK(max_token_len >= longest, "max_token_len: {} is less than the longest sample's {} tokens", max_token_len,
           longest);
  const int64_t fewest = B == 0 ? 0 : std::max<int64_t>(1, (total + max_token_len - 1) / max_token_len);

  // Every rank proposes the smallest count >= the agreed one that fits here; the group takes the
  // largest proposal, until a round's largest proposal is the agreed count itself (then all fit at it).
  int64_t agreed = 0;
  std::optional<Partition> parts;
  while (true) {
    int64_t proposal = std::max(agreed, fewest);
    parts = split_within_budget(seqlens_B, workloads, proposal, max_token_len);
    while (!parts && proposal < B) parts = split_within_budget(seqlens_B, workloads, ++proposal, max_token_len);
    const double largest = dp.all_reduce_scalar(parts ? double(proposal) : kCannot, dist::ReduceOp::max);
    RF_CHECK(largest != kCannot,
             "dynamic micro-batches: some rank of the '{}' group cannot cut its samples into {} or more micro-batches "
             "within max_token_len={}, as its peers need (this rank: {} samples, {} tokens)",
             dp.name(), agreed, max_token_len, B, total);
    if (int64_t(largest) == agreed) break;  // every rank proposed the agreed count: all fit at it
    agreed = int64_t(largest);
  }
  return running_order(std::move(*parts), workloads);
}

}  // namespace rf::rl
