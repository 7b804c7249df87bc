#include "core/memory_tracker.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf {

std::string_view memory_tier_name(MemoryTier tier) {
  switch (tier) {
    case MemoryTier::device: return "device";
    case MemoryTier::host: return "host";
    case MemoryTier::disk: return "disk";
  }
  return "?";
}

std::string_view memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::params: return "params";
    case MemoryCategory::grads: return "grads";
    case MemoryCategory::optimizer: return "optimizer";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::kv_cache: return "kv_cache";
    case MemoryCategory::workspace: return "workspace";
  }
  return "?";
}

void MemoryTracker::raise_peak(Counter& counter, int64_t value) {
  int64_t seen = counter.peak.load(std::memory_order_relaxed);
  while (value > seen && !counter.peak.compare_exchange_weak(seen, value)) {
  }
}

void MemoryTracker::on_allocate(MemoryTier tier, MemoryCategory category, int64_t bytes) {
  Counter& total = by_tier_[size_t(tier)];
  const int64_t limit = budget_[size_t(tier)];
  // Check and add in one step: adding first and undoing on failure would let a concurrent
  // allocation see (and fail on, or record as its peak) bytes that were never held.
  int64_t held = total.current.load();
  int64_t now = 0;
  do {
    now = held + bytes;
    // The user's budget, not a broken expectation: a plain Error saying what did not fit.
    if (limit != kNoBudget && now > limit)
      throw Error(fmt::format("[{}] out of {} memory: allocating {} of {} would hold {} of the {} {} budget{}",
                              core::rank_label(), memory_tier_name(tier), format_bytes(bytes),
                              memory_category_name(category), format_bytes(now), format_bytes(limit),
                              memory_tier_name(tier), tier == MemoryTier::device
                                                          ? " (trainer.device_memory_budget_gb in SFT, "
                                                            "resources.device_memory_gb in RL)"
                                                          : ""));
  } while (!total.current.compare_exchange_weak(held, now));
  raise_peak(total, now);
  Counter& counter = by_category_[size_t(tier)][size_t(category)];
  raise_peak(counter, counter.current.fetch_add(bytes) + bytes);
}

void MemoryTracker::on_release(MemoryTier tier, MemoryCategory category, int64_t bytes) {
  by_tier_[size_t(tier)].current.fetch_sub(bytes);
  by_category_[size_t(tier)][size_t(category)].current.fetch_sub(bytes);
}

int64_t MemoryTracker::current(MemoryTier tier, MemoryCategory category) const {
  return by_category_[size_t(tier)][size_t(category)].current.load();
}
int64_t MemoryTracker::peak(MemoryTier tier, MemoryCategory category) const {
  return by_category_[size_t(tier)][size_t(category)].peak.load();
}
int64_t MemoryTracker::current(MemoryTier tier) const { return by_tier_[size_t(tier)].current.load(); }
int64_t MemoryTracker::peak(MemoryTier tier) const { return by_tier_[size_t(tier)].peak.load(); }

void MemoryTracker::reset_peaks() {
  for (int t = 0; t < kNumMemoryTiers; ++t) {
    by_tier_[size_t(t)].peak.store(by_tier_[size_t(t)].current.load());
    for (auto& counter : by_category_[size_t(t)]) counter.peak.store(counter.current.load());
  }
}

std::string MemoryTracker::summary() const {
  std::string out;
  for (int t = 0; t < kNumMemoryTiers; ++t) {
    const auto tier = MemoryTier(t);
    if (peak(tier) == 0) continue;
    out += fmt::format("{}{}: {} (peak {})", out.empty() ? "" : "\n", memory_tier_name(tier),
                       format_bytes(current(tier)), format_bytes(peak(tier)));
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = MemoryCategory(c);
      if (peak(tier, category) == 0) continue;
      out += fmt::format(", {} {} (peak {})", memory_category_name(category),
                         format_bytes(current(tier, category)), format_bytes(peak(tier, category)));
    }
  }
  return out;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while ((value >= 1024.0 || value <= -1024.0) && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace rf
