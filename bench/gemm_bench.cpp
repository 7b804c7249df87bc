// GEMM throughput of the cpu linear kernels on the matrix shapes of a small transformer (hidden
// 512, FFN 1408, vocab 8192, 2048 tokens): f32 through oneDNN, OpenBLAS and the ordered GEMM (the
// KernelConfig::f32_gemm choices) and bf16 through oneDNN (where it has a bf16 kernel) and the ordered
// GEMM, for the forward y = x w^T and both backward GEMMs (dgrad dx = dy w, wgrad dw += dy^T x), and
// the forward at decode sizes (1, 8 and 64 rows). Each line gives GFLOP/s and the fraction of the same
// engine's GEMM peak measured in the same run (a square 2048^3 product); the last lines give the
// speed-up over the `ref` kernels on one small shape.
//   usage: OMP_NUM_THREADS=2 gemm_bench
// Output: `gemm <pass>:<M>x<N>x<K> <dtype>_<library> <GFLOP/s> ...`, M x N x K the GEMM's extents.
// Legend: N rows (tokens), I in-features, O out-features.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "kernels/blas_info.h"
#include "kernels/kernel_registry.h"

namespace {

using rf::DType;
using rf::Shape;
using rf::Tensor;
using namespace rf::kernels;

// Best wall time of `fn` after a warm-up call, over at least 3 runs and `min_seconds` in all: on
// a shared machine the minimum is the least noisy estimate of what the kernel can do.
double best_seconds(const std::function<void()>& fn, double min_seconds = 0.5) {
  fn();
  double best = 1e30;
  const rf::Stopwatch total;
  for (int runs = 0; runs < 3 || total.seconds() < min_seconds; ++runs) {
    const rf::Stopwatch one;
    fn();
    best = std::min(best, one.seconds());
  }
  return best;
}

Tensor random(Shape shape, DType dtype, uint64_t seed) {
  Tensor t(shape, dtype);
  rf::fill_uniform(t, rf::Philox(seed, 0), -1.0, 1.0);
  return t;
}

double gflops(int64_t M, int64_t N, int64_t K, double seconds) { return 2.0 * double(M * N * K) / seconds * 1e-9; }

double square_gemm_gflops(const KernelTable& table, DType dtype, int64_t size) {
  const Tensor a = random({size, size}, dtype, 1), b = random({size, size}, dtype, 2);
  const Tensor c({size, size}, dtype);
  return gflops(size, size, size, best_seconds([&] { table.gemm({}, a, b, c); }));
}

struct LinearShape {
  const char* layer;
  int64_t N, I, O;
};

}  // namespace

int main() {
  const KernelRegistry registry;
  std::printf("# %s\n# %d OpenMP threads\n", registry.describe().c_str(), omp_get_max_threads());

  constexpr int64_t kTokens = 2048, kHidden = 512, kFfn = 1408, kVocab = 8192;
  const LinearShape shapes[] = {{"attn_proj", kTokens, kHidden, kHidden},
                                {"mlp_up", kTokens, kHidden, kFfn},
                                {"mlp_down", kTokens, kFfn, kHidden},
                                {"lm_head", kTokens, kHidden, kVocab}};
  std::vector<std::pair<DType, GemmLibrary>> setups = {
      {DType::f32, GemmLibrary::onednn}, {DType::f32, GemmLibrary::openblas}, {DType::f32, GemmLibrary::ordered}};
  if (onednn_has_bf16_matmul()) setups.emplace_back(DType::bf16, GemmLibrary::onednn);
  setups.emplace_back(DType::bf16, GemmLibrary::ordered);
  for (const auto& [dtype, library] : setups) {
    const KernelRegistry chosen(KernelConfig{.f32_gemm = library});
    const KernelTable& table = chosen.table(KernelOp::linear, DType::f32);  // the engine's table; it runs bf16 too
    const std::string label = fmt::format("{}_{}", rf::dtype_name(dtype), gemm_library_name(library));
    const char* name = label.c_str();
    const double peak = square_gemm_gflops(table, dtype, 2048);
    std::printf("peak 2048x2048x2048 %s %.1f GFLOP/s (%s)\n", name, peak,
                std::string(kernel_variant_name(table.variant)).c_str());
    auto report = [&](const char* pass, const LinearShape& s, int64_t M, int64_t N, int64_t K, double seconds) {
      const double rate = gflops(M, N, K, seconds);
      std::printf("gemm %s:%ldx%ldx%ld %s %.1f GFLOP/s %3.0f%% of peak  [%s]\n", pass, long(M), long(N), long(K), name,
                  rate, 100.0 * rate / peak, s.layer);
    };
    for (const LinearShape& s : shapes) {
      const Tensor x = random({s.N, s.I}, dtype, 3), w = random({s.O, s.I}, dtype, 4);
      const Tensor dy = random({s.N, s.O}, dtype, 5);
      const Tensor y({s.N, s.O}, dtype), dx({s.N, s.I}, dtype), dw({s.O, s.I}, DType::f32);
      report("fwd", s, s.N, s.O, s.I, best_seconds([&] { table.linear_forward(x, w, Tensor().view(), y); }));
      report("dgrad", s, s.N, s.I, s.O, best_seconds([&] { table.linear_dgrad(dy, w, dx, Accumulate::overwrite); }));
      report("wgrad", s, s.O, s.I, s.N, best_seconds([&] { table.linear_wgrad(dy, x, dw, Tensor().view(), Accumulate::add); }));
    }
    for (int64_t rows : {1, 8, 64}) {
      const LinearShape s{"decode_mlp_up", rows, kHidden, kFfn};
      const Tensor x = random({s.N, s.I}, dtype, 3), w = random({s.O, s.I}, dtype, 4), y({s.N, s.O}, dtype);
      report("fwd", s, s.N, s.O, s.I, best_seconds([&] { table.linear_forward(x, w, Tensor().view(), y); }, 0.2));
    }
  }

  // The fast kernels against the ref oracle on one shape small enough for the ref triple loop.
  constexpr int64_t kSmall = 256;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = random({kSmall, kSmall}, dtype, 6), b = random({kSmall, kSmall}, dtype, 7);
    const Tensor c({kSmall, kSmall}, dtype);
    const double fast = best_seconds([&] { registry.gemm({}, a, b, c); }, 0.2);
    const double ref = best_seconds([&] { ref::table().gemm({}, a, b, c); }, 0.2);
    std::printf("gemm_vs_ref %ldx%ldx%ld %s fast %.1f GFLOP/s ref %.2f GFLOP/s speed-up %.0fx\n", long(kSmall),
                long(kSmall), long(kSmall), rf::dtype_name(dtype).data(), gflops(kSmall, kSmall, kSmall, fast),
                gflops(kSmall, kSmall, kSmall, ref), ref / fast);
  }
  return 0;
}
