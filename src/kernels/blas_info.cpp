#include "kernels/blas_info.h"

#include <cblas.h>
#include <dnnl.hpp>
#include <fmt/format.h>

namespace rf::kernels {

std::string blas_core_name() { return openblas_get_corename(); }

std::string onednn_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string blas_info() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{} (core {}, {} threads); oneDNN {}.{}.{} (isa {})", openblas_get_config(),
                     openblas_get_corename(), openblas_get_num_threads(), v->major, v->minor, v->patch,
                     onednn_isa_name());
}

bool onednn_has_bf16_matmul() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512_core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);  // ISA values are feature masks
  return (isa & avx512_core) == avx512_core;
}

}  // namespace rf::kernels
