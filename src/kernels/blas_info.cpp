#include "kernels/blas_info.h"

#include <cblas.h>
#include <dnnl.hpp>
#include <fmt/format.h>

namespace rf::kernels {

std::string blas_info() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "?";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: isa = "other"; break;
  }
  return fmt::format("{} (core {}, {} threads); oneDNN {}.{}.{} (isa {})", openblas_get_config(),
                     openblas_get_corename(), openblas_get_num_threads(), v->major, v->minor, v->patch, isa);
}

}  // namespace rf::kernels
