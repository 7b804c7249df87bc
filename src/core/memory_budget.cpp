#include "core/memory_budget.h"

#include <unistd.h>

namespace rf {

MemoryBudget machine_memory_budget() {
  return {int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE)), "physical memory"};
}

MemoryBudget memory_budget(const MemoryTracker& tracker) {
  const int64_t device = tracker.budget(MemoryTier::device);
  if (device != MemoryTracker::kNoBudget) return {device, "the memory tracker's device budget"};
  return machine_memory_budget();
}

MemoryTracker& with_device_budget(MemoryTracker& tracker, std::optional<double> gib) {
  if (gib) tracker.set_budget(MemoryTier::device, int64_t(*gib * double(int64_t(1) << 30)));
  return tracker;
}

}  // namespace rf
