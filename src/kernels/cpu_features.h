// The CPU features that decide which kernel variant can run, detected once at start-up (cpuid and
// the OS's saved-state mask, so AVX-512 is only "present" when the kernel enables it).
#pragma once

#include <string>

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

  static CpuFeatures detect();
  std::string describe() const;  // "avx2 fma f16c avx512f ... (no amx)"
};

}  // namespace rf::kernels
