#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace rf::kernels {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect_hardware() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27);
  const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool avx_state = (xcr0 & 0x6) == 0x6;             // XMM and YMM saved by the OS
  const bool avx512_state = (xcr0 & 0xe6) == 0xe6;        // + opmask and ZMM
  const bool amx_state = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG and XTILEDATA
  f.fma = avx_state && (ecx & (1u << 12));
  f.f16c = avx_state && (ecx & (1u << 29));
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = avx_state && (ebx & (1u << 5));
  f.avx512f = avx512_state && (ebx & (1u << 16));
  f.avx512dq = avx512_state && (ebx & (1u << 17));
  f.avx512bw = avx512_state && (ebx & (1u << 30));
  f.avx512vl = avx512_state && (ebx & (1u << 31));
  f.amx_bf16 = amx_state && (edx & (1u << 22));
  f.amx_tile = amx_state && (edx & (1u << 24));
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx512_bf16 = avx512_state && (eax & (1u << 5));
  return f;
}

}  // namespace

CpuFeatures CpuFeatures::detect() {
  const CpuFeatures hardware = detect_hardware();
  const char* cap = std::getenv("RLFORGE_MAX_CPU_ISA");
  return cap == nullptr || *cap == '\0' ? hardware : hardware.capped(cap);
}

CpuFeatures CpuFeatures::capped(std::string_view isa) const {
  if (isa != "generic" && isa != "avx2" && isa != "avx512")
    throw ConfigError("RLFORGE_MAX_CPU_ISA", fmt::format("unknown ISA '{}': expected generic, avx2 or avx512", isa));
  CpuFeatures f = isa == "generic" ? CpuFeatures{} : *this;
  if (isa == "avx2") f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.amx_tile = f.amx_bf16 = false;
  f.cap = std::string(isa);
  return f;
}

std::string CpuFeatures::describe() const {
  std::string out;
  auto add = [&](bool has, const char* name) {
    if (!has) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_bf16, "avx512_bf16");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  if (!amx_tile) out += " (no amx)";
  if (out.empty()) out = "baseline x86-64 only";
  if (!cap.empty()) out += fmt::format(" [RLFORGE_MAX_CPU_ISA={}]", cap);
  return out;
}

}  // namespace rf::kernels
