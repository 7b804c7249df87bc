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

}  // namespace rf
