// MemoryTracker: bytes held by tier (device / host / disk) and category (params, grads, ...),
// current and peak, plus an optional budget per tier (DESIGN §9). On the CPU backend "device" is
// RAM with a configurable budget, so offloading moves bytes out of that budget exactly as it would
// move them off an accelerator. Thread-safe; one tracker per process, passed down (never global).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace rf {

enum class MemoryTier : uint8_t { device, host, disk };
enum class MemoryCategory : uint8_t { params, grads, optimizer, activations, kv_cache, workspace };
inline constexpr int kNumMemoryTiers = 3;
inline constexpr int kNumMemoryCategories = 6;

std::string_view memory_tier_name(MemoryTier tier);
std::string_view memory_category_name(MemoryCategory category);

class MemoryTracker {
 public:
  static constexpr int64_t kNoBudget = -1;

  // Throws rf::Error naming the tier, category and sizes when the allocation would exceed the
  // tier's budget; the counters are left unchanged then.
  void on_allocate(MemoryTier tier, MemoryCategory category, int64_t bytes);
  void on_release(MemoryTier tier, MemoryCategory category, int64_t bytes);

  void set_budget(MemoryTier tier, int64_t bytes) { budget_[size_t(tier)] = bytes; }
  int64_t budget(MemoryTier tier) const { return budget_[size_t(tier)]; }

  int64_t current(MemoryTier tier, MemoryCategory category) const;
  int64_t peak(MemoryTier tier, MemoryCategory category) const;
  int64_t current(MemoryTier tier) const;  // all categories
  int64_t peak(MemoryTier tier) const;     // peak of the sum, not the sum of peaks
  void reset_peaks();

  // One line per tier with a non-zero peak, listing its categories with a non-zero peak:
  // "device: 12.0 MiB (peak 20.1 MiB), params 8.0 MiB (peak 8.0 MiB), grads ...".
  std::string summary() const;

 private:
  struct Counter {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
  };
  static void raise_peak(Counter& counter, int64_t value);

  std::array<std::array<Counter, kNumMemoryCategories>, kNumMemoryTiers> by_category_;
  std::array<Counter, kNumMemoryTiers> by_tier_;
  std::array<int64_t, kNumMemoryTiers> budget_{kNoBudget, kNoBudget, kNoBudget};
};

std::string format_bytes(int64_t bytes);  // "1.5 GiB"

}  // namespace rf
