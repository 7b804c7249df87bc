#include "rl/seqlen_balancing.h"

#include <algorithm>

#include "core/error.h"

namespace rf::rl {
namespace {

struct Item {
  int64_t value;
  int64_t index;
  auto operator<=>(const Item&) const = default;
};

struct Part {
  int64_t sum = 0;
  std::vector<Item> items;

  void add(const Item& item) {
    items.push_back(item);
    sum += item.value;
  }
  // By sum, then item count, then the items themselves, as verl orders its sets.
  bool operator<(const Part& other) const {
    if (sum != other.sum) return sum < other.sum;
    if (items.size() != other.items.size()) return items.size() < other.items.size();
    return items < other.items;
  }
};

// A partial solution: k parts, largest first.
struct PartialSolution {
  std::vector<Part> parts;

  int64_t spread() const { return parts.front().sum - parts.back().sum; }
  void sort_parts() { std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return b < a; }); }
  // The largest part of one side meets the smallest of the other, which is what cancels the spreads.
  void merge(const PartialSolution& other) {
    const size_t k = parts.size();
    for (size_t i = 0; i < k; ++i)
      for (const Item& item : other.parts[k - 1 - i].items) parts[i].add(item);
    sort_parts();
  }
};

// The heap's order: the largest spread first, then the one whose largest part is larger.
struct MergeFirst {
  bool operator()(const PartialSolution& a, const PartialSolution& b) const {
    if (a.spread() != b.spread()) return a.spread() < b.spread();
    return a.parts.front() < b.parts.front();
  }
};

}  // namespace

int64_t sequence_workload(int64_t num_tokens) { return 24576 * num_tokens + num_tokens * num_tokens; }

std::vector<std::vector<int64_t>> balanced_partitions(std::span<const int64_t> values, int64_t num_parts,
                                                      PartSizes sizes) {
  const auto n = int64_t(values.size());
  RF_CHECK(num_parts >= 1 && num_parts <= n, "num_parts: expected between 1 and the {} items, got {}", n, num_parts);
  RF_CHECK(sizes == PartSizes::any || n % num_parts == 0,
           "num_parts: {} equal parts need a multiple of {} items, got {}", num_parts, num_parts, n);
  std::vector<Item> sorted;
  for (int64_t i = 0; i < n; ++i) sorted.push_back({values[size_t(i)], i});
  std::sort(sorted.begin(), sorted.end());

  // Equal sizes: k consecutive items of the sorted order, one per part, make a partial solution.
  const int64_t items_per_seed = sizes == PartSizes::equal ? num_parts : 1;
  std::vector<PartialSolution> heap;
  for (int64_t first = 0; first < n; first += items_per_seed) {
    PartialSolution seed{std::vector<Part>(size_t(num_parts))};
    for (int64_t j = 0; j < items_per_seed; ++j) seed.parts[size_t(j)].add(sorted[size_t(first + j)]);
    seed.sort_parts();
    heap.push_back(std::move(seed));
  }
  std::make_heap(heap.begin(), heap.end(), MergeFirst{});
  const auto pop = [&heap] {
    std::pop_heap(heap.begin(), heap.end(), MergeFirst{});
    PartialSolution top = std::move(heap.back());
    heap.pop_back();
    return top;
  };
  while (heap.size() > 1) {
    PartialSolution a = pop();
    a.merge(pop());
    heap.push_back(std::move(a));
    std::push_heap(heap.begin(), heap.end(), MergeFirst{});
  }

  std::vector<std::vector<int64_t>> partitions;
  for (const Part& part : heap.front().parts) {
    std::vector<int64_t>& indices = partitions.emplace_back();
    for (const Item& item : part.items) indices.push_back(item.index);
    std::sort(indices.begin(), indices.end());
  }
  return partitions;
}

std::vector<int64_t> balance_batch_order(std::span<const int64_t> seqlens_B, int64_t dp_size) {
  std::vector<int64_t> workloads;
  for (int64_t length : seqlens_B) workloads.push_back(sequence_workload(length));
  std::vector<int64_t> order;
  for (std::vector<int64_t>& part : balanced_partitions(workloads, dp_size, PartSizes::equal)) {
    std::sort(part.begin(), part.end(), [&](int64_t a, int64_t b) {
      return std::pair(workloads[size_t(a)], a) < std::pair(workloads[size_t(b)], b);
    });
    std::vector<int64_t> odd_ranked;
    for (size_t i = 0; i < part.size(); ++i) (i % 2 == 0 ? order : odd_ranked).push_back(part[i]);
    order.insert(order.end(), odd_ranked.rbegin(), odd_ranked.rend());
  }
  return order;
}

}  // namespace rf::rl
