// The CPU features that decide which kernel variant can run, detected once at start-up (cpuid and
// the OS's saved-state mask, so AVX-512 is only "present" when the kernel enables it).
// RLFORGE_MAX_CPU_ISA=generic|avx2|avx512 hides what lies above it, as ONEDNN_MAX_CPU_ISA does for
// oneDNN: an AVX-512 machine then runs exactly what an AVX2-only one would (tests, CI's lowest-ISA pass).
#pragma once

#include <string>
#include <string_view>

namespace rf::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;

  std::string cap;  // the RLFORGE_MAX_CPU_ISA value applied, or empty

  // This CPU, capped by RLFORGE_MAX_CPU_ISA when it is set (ConfigError naming it when unknown).
  static CpuFeatures detect();
  // These features without any above `isa`: generic (baseline x86-64), avx2 (+ fma, f16c) or avx512.
  CpuFeatures capped(std::string_view isa) const;
  std::string describe() const;  // "avx2 fma f16c avx512f ... (no amx)"
};

}  // namespace rf::kernels
