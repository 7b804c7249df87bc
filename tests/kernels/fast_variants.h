// The fast kernel tables this CPU can run (cpu_generic, cpu_avx2, cpu_avx512), for conformance
// tests that check every one of them against the ref twin; for the GEMM-backed ops (gemm, linear,
// the grouped GEMM), every one of them on every GEMM engine.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/blas_info.h"
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

struct FastTable {
  const KernelTable* table;
  std::string name;  // "cpu_avx2/ordered"
};

// Every cpu variant this CPU runs, on every GEMM engine that takes `dtype`: oneDNN (bf16 only where
// it has a bf16 kernel), OpenBLAS (f32 only) and the ordered GEMM.
inline std::vector<FastTable> fast_tables(DType dtype) {
  const KernelRegistry registry;
  std::vector<FastTable> tables;
  for (KernelVariant v : {KernelVariant::cpu_generic, KernelVariant::cpu_avx2, KernelVariant::cpu_avx512}) {
    if (!registry.can_run(v)) continue;
    for (GemmLibrary library : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::ordered}) {
      if (dtype == DType::bf16 && library == GemmLibrary::openblas) continue;
      if (dtype == DType::bf16 && library == GemmLibrary::onednn && !onednn_has_bf16_matmul()) continue;
      const KernelRegistry chosen(KernelConfig{.force_variant = v, .f32_gemm = library});
      tables.push_back({&chosen.table(KernelOp::gemm, DType::f32),
                        fmt::format("{}/{}", kernel_variant_name(v), gemm_library_name(library))});
    }
  }
  return tables;
}

}  // namespace rf::kernels
