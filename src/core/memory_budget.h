// MemoryBudget: how many bytes a run may hold, and what says so, for the estimates that refuse a model
// before it allocates (model/memory_estimate.h): a MemoryTracker's device-tier budget when one is set (the
// tests'), else this machine's physical memory. Not here: tracking what is held (memory_tracker.h); a
// container's cgroup limit (not read: a run above it is killed by the kernel, not refused by name).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/memory_tracker.h"

namespace rf {

struct MemoryBudget {
  int64_t bytes = 0;
  std::string source;  // "physical memory" or "the memory tracker's device budget"
};

MemoryBudget machine_memory_budget();
MemoryBudget memory_budget(const MemoryTracker& tracker);

// Sets `tracker`'s device-tier budget to `gib` GiB (none: leaves it unset) and returns it: for the trainers, which
// pass their tracker to the engines with the budget their config gives (trainer.device_memory_budget_gb,
// resources.device_memory_gb), so that whatever would exceed it fails by name (MemoryTracker::on_allocate).
MemoryTracker& with_device_budget(MemoryTracker& tracker, std::optional<double> gib);

}  // namespace rf
