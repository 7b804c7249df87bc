#include "kernels/gemm_peak.h"

#include <algorithm>

#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"

namespace rf::kernels {

double measure_gemm_peak_gflops(const KernelRegistry& kernels, DType dtype) {
  constexpr int64_t n = 1024;
  const Tensor a({n, n}, dtype), b({n, n}, dtype), c({n, n}, DType::f32);
  fill_uniform(a, Philox(1, 0), -1, 1);
  fill_uniform(b, Philox(1, 1), -1, 1);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    Stopwatch clock;
    kernels.gemm({}, a, b, c);
    if (i > 0) best = std::min(best, clock.seconds());  // the first call pays for setup
  }
  return 2.0 * double(n * n * n) / best / 1e9;
}

}  // namespace rf::kernels
