// The fast kernel tables this CPU can run (cpu_generic, cpu_avx2, cpu_avx512), for conformance
// tests that check every one of them against the ref twin.
#pragma once

#include <vector>

#include "kernels/kernel_registry.h"

namespace rf::kernels {

inline std::vector<const KernelTable*> fast_tables() {
  const KernelRegistry registry;
  std::vector<const KernelTable*> tables;
  for (KernelVariant variant : {KernelVariant::cpu_generic, KernelVariant::cpu_avx2, KernelVariant::cpu_avx512})
    if (registry.can_run(variant))
      tables.push_back(&KernelRegistry(KernelConfig{.force_variant = variant}).table(KernelOp::rmsnorm, DType::f32));
  return tables;
}

}  // namespace rf::kernels
