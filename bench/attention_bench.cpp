// Fused causal GQA attention (the registry's fastest cpu kernel) against the `ref` kernel, measured
// in one run, forward and backward, f32 and bf16, on the training shapes: the "large" config
// (B=8, T=256, H=8, K=4, D=64) unpacked and packed (4 documents of 64 tokens per row), and the
// "tiny" config (B=16, T=64, H=4, K=2, D=32) unpacked. One line per case:
//   RESULT attention <fwd|bwd> <f32|bf16> <packed|unpacked> B=.. T=.. H=.. K=.. D=.. fused_ms=..
//     ref_ms=.. ratio_vs_ref=.. GFLOP/s=.. %gemm_peak=..
// Then RoPE fused into the attention load against the separate RoPE kernel on q and k followed by
// attention (backward: attention, then RoPE backward on dq and dk), both on the registry's kernels:
//   RESULT attention_rope <fwd|bwd> <f32|bf16> <packed|unpacked> B=.. T=.. fused_rope_ms=..
//     separate_ms=.. ratio=..
// Then span mode (context parallel's off-diagonal ring block: each row's T queries see all T keys of
// another chunk, unmasked) on the "large" and "tiny" configs against `ref` the same way:
//   RESULT attention_span <fwd|bwd> <f32|bf16> B=.. Tq=.. Tk=.. H=.. K=.. D=.. fused_ms=.. ref_ms=..
//     ratio_vs_ref=.. GFLOP/s=.. %gemm_peak=..
// FLOPs count the causal in-document (query, key) pairs only (span mode: all of them): 2 GEMMs (QK^T, PV) forward, 5 backward
// (QK^T recomputed, dO V^T, P^T dO, dS^T Q, dS K), 2 D FLOPs per pair each. %gemm_peak is against the
// machine's f32 GEMM rate measured at start (measure_gemm_peak), for both dtypes.
//   usage: attention_bench [--threads N]   (default: one thread per core)
// Timing: fused = the median of 7-50 calls (about 0.3 s) after a warm-up call. `ref` is naive and
// single-threaded: it runs on the first row only (its cost is linear in B), median of 3 calls, times
// B; each line says so.
// Legend: B batch, T sequence, H heads, K kv heads, D head dim.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/gemm_peak.h"
#include "kernels/kernel_registry.h"

namespace {

using rf::DType;
using rf::Shape;
using rf::Tensor;
using rf::TensorView;
using namespace rf::kernels;

constexpr int kFusedMinReps = 7, kFusedMaxReps = 50;
constexpr double kFusedTargetSeconds = 0.3;  // fused calls repeat until about this long: steadier medians
constexpr int kRefReps = 3;

struct BenchCase {
  const char* name;
  int64_t B, T, H, K, D;
  int64_t doc_length;  // 0: each row one document
};

constexpr BenchCase kCases[] = {
    {"large", 8, 256, 8, 4, 64, 0},
    {"large", 8, 256, 8, 4, 64, 64},
    {"tiny", 16, 64, 4, 2, 32, 0},
};

double seconds_of(const std::function<void()>& fn) {
  const rf::Stopwatch clock;
  fn();
  return clock.seconds();
}

// Median wall time of `reps` calls (0: as many as fill kFusedTargetSeconds, within the fused bounds)
// after one warm-up call.
double median_seconds(const std::function<void()>& fn, int reps) {
  const double warm_up = seconds_of(fn);
  if (reps == 0) reps = std::clamp(int(kFusedTargetSeconds / std::max(warm_up, 1e-6)), kFusedMinReps, kFusedMaxReps);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) times.push_back(seconds_of(fn));
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[size_t(reps / 2)];
}

Tensor random(Shape shape, DType dtype, uint64_t seed) {
  Tensor t(shape, dtype);
  rf::fill_uniform(t, rf::Philox(seed, 0), -1.0, 1.0);
  return t;
}

// Documents of doc_length tokens tiling every row (a row's last one shorter if T is not a multiple).
std::vector<int32_t> packed_cu_seqlens(const BenchCase& s) {
  if (s.doc_length == 0) return {};
  std::vector<int32_t> cu{0};
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t start = 0; start < s.T; start += s.doc_length)
      cu.push_back(int32_t(b * s.T + std::min(s.T, start + s.doc_length)));
  return cu;
}

// Causal (query, key) pairs inside documents, over all rows and query heads.
double causal_pairs(const BenchCase& s) {
  const int64_t doc = s.doc_length == 0 ? s.T : s.doc_length;
  double pairs_per_row = 0;
  for (int64_t start = 0; start < s.T; start += doc) {
    const double n = double(std::min(doc, s.T - start));
    pairs_per_row += n * (n + 1) / 2;
  }
  return pairs_per_row * double(s.B * s.H);
}

struct Tensors {
  Tensor q, k, v, out, lse, dout, dq, dk, dv;
  Tensor positions_N;  // restarting at every document, as the trainer feeds them
};

Tensors make_tensors(const BenchCase& s, DType dtype) {
  Tensors x;
  x.q = random({s.B, s.T, s.H, s.D}, dtype, 1);
  x.k = random({s.B, s.T, s.K, s.D}, dtype, 2);
  x.v = random({s.B, s.T, s.K, s.D}, dtype, 3);
  x.out = Tensor({s.B, s.T, s.H, s.D}, dtype);
  x.lse = Tensor({s.B, s.H, s.T}, DType::f32);
  x.dout = random({s.B, s.T, s.H, s.D}, dtype, 4);
  x.dq = Tensor({s.B, s.T, s.H, s.D}, dtype);
  x.dk = Tensor({s.B, s.T, s.K, s.D}, dtype);
  x.dv = Tensor({s.B, s.T, s.K, s.D}, dtype);
  x.positions_N = Tensor({s.B * s.T}, DType::i64);
  const int64_t doc = s.doc_length == 0 ? s.T : s.doc_length;
  for (int64_t n = 0; n < s.B * s.T; ++n) x.positions_N.data<int64_t>()[n] = n % s.T % doc;
  return x;
}

enum class Rope : uint8_t { none, fused };

// Rows [0, rows) of every tensor (and the cu_seqlens of those rows).
void run(const KernelTable& table, const Tensors& x, const std::vector<int32_t>& cu_seqlens, int64_t rows, int64_t T,
         bool backward, Rope rope = Rope::none) {
  auto head = [rows](const Tensor& t) { return t.view().slice(0, 0, rows); };
  std::vector<int32_t> cu;
  for (int32_t boundary : cu_seqlens)
    if (boundary <= rows * T) cu.push_back(boundary);
  AttentionParams params{.cu_seqlens = cu};
  if (rope == Rope::fused) params.rope = AttentionRope{{}, x.positions_N.view().slice(0, 0, rows * T)};
  if (backward)
    table.attention_backward(params, head(x.q), head(x.k), head(x.v), head(x.out), head(x.lse), head(x.dout),
                             head(x.dq), head(x.dk), head(x.dv));
  else
    table.attention_forward(params, head(x.q), head(x.k), head(x.v), head(x.out), head(x.lse));
}

// Span mode on rows [0, rows): one span per row, its T queries against all T keys of the row.
void run_span(const KernelTable& table, const Tensors& x, int64_t rows, int64_t T, bool backward) {
  auto head = [rows](const Tensor& t) { return t.view().slice(0, 0, rows); };
  std::vector<AttentionSpan> spans;
  for (int64_t b = 0; b < rows; ++b) spans.push_back({b * T, (b + 1) * T, b * T, (b + 1) * T});
  const AttentionParams params{.spans = spans};
  if (backward)
    table.attention_backward(params, head(x.q), head(x.k), head(x.v), head(x.out), head(x.lse), head(x.dout),
                             head(x.dq), head(x.dk), head(x.dv));
  else
    table.attention_forward(params, head(x.q), head(x.k), head(x.v), head(x.out), head(x.lse));
}

// RoPE as its own kernel around attention: q and k rotated in place before the forward; dq and dk
// rotated back after the backward.
void run_separate_rope(const KernelRegistry& registry, const Tensors& x, const std::vector<int32_t>& cu_seqlens,
                       bool backward) {
  const int64_t N = x.q.size(0) * x.q.size(1);
  auto tokens = [N](const Tensor& t) { return t.view().reshape({N, t.size(2), t.size(3)}); };
  const KernelTable& attention = registry.table(KernelOp::attention, x.q.dtype());
  if (!backward) {
    registry.rope_forward({}, x.positions_N, tokens(x.q));
    registry.rope_forward({}, x.positions_N, tokens(x.k));
    run(attention, x, cu_seqlens, x.q.size(0), x.q.size(1), false);
  } else {
    run(attention, x, cu_seqlens, x.q.size(0), x.q.size(1), true);
    registry.rope_backward({}, x.positions_N, tokens(x.dq));
    registry.rope_backward({}, x.positions_N, tokens(x.dk));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = rf::bench::parse_threads(argc, argv);
  if (threads < 0) {
    std::fprintf(stderr, "usage: attention_bench [--threads N]   (N = 0: one thread per core)\n");
    return 2;
  }
  const rf::ThreadPool pool(threads, "--threads");
  const KernelRegistry registry;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("# %s\n# OPENBLAS_CORETYPE=%s\n", pool.describe().c_str(), coretype ? coretype : "(unset)");
  std::printf(
      "# fused: median of %d-%d calls (about %.1f s) after a warm-up; ref: first row only, median of %d calls, "
      "time x B\n",
      kFusedMinReps, kFusedMaxReps, kFusedTargetSeconds, kRefReps);
  const double peak = measure_gemm_peak(DType::f32).best();
  std::printf("RESULT peak f32_gemm_gflops=%.1f\n", peak);

  for (DType dtype : {DType::f32, DType::bf16}) {
    const KernelTable& fused = registry.table(KernelOp::attention, dtype);
    for (const BenchCase& s : kCases) {
      const Tensors x = make_tensors(s, dtype);
      const std::vector<int32_t> cu = packed_cu_seqlens(s);
      run(fused, x, cu, s.B, s.T, false);  // the saved out and lse the backward reads
      for (bool backward : {false, true}) {
        const double fused_s = median_seconds([&] { run(fused, x, cu, s.B, s.T, backward); }, 0);
        const double ref_s =
            median_seconds([&] { run(ref::table(), x, cu, 1, s.T, backward); }, kRefReps) * double(s.B);
        const double flops = 2.0 * (backward ? 5 : 2) * double(s.D) * causal_pairs(s);
        const double gflops = flops / fused_s * 1e-9;
        const std::string line = fmt::format(
            "RESULT attention {} {} {} B={} T={} H={} K={} D={} fused_ms={:.3f} ref_ms={:.1f} ratio_vs_ref={:.1f} "
            "GFLOP/s={:.1f} %gemm_peak={:.1f} ({} config{}; fused={}; ref timed on B=1, time x{})",
            backward ? "bwd" : "fwd", rf::dtype_name(dtype), s.doc_length ? "packed" : "unpacked", s.B, s.T, s.H, s.K,
            s.D, fused_s * 1e3, ref_s * 1e3, ref_s / fused_s, gflops, 100.0 * gflops / peak, s.name,
            s.doc_length ? fmt::format(", documents of {} tokens", s.doc_length) : "",
            kernel_variant_name(fused.variant), s.B);
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
      for (bool backward : {false, true}) {
        const double fused_s = median_seconds([&] { run(fused, x, cu, s.B, s.T, backward, Rope::fused); }, 0);
        const double separate_s = median_seconds([&] { run_separate_rope(registry, x, cu, backward); }, 0);
        std::printf("RESULT attention_rope %s %s %s B=%ld T=%ld fused_rope_ms=%.3f separate_ms=%.3f ratio=%.3f\n",
                    backward ? "bwd" : "fwd", std::string(rf::dtype_name(dtype)).c_str(), s.doc_length ? "packed" : "unpacked", long(s.B),
                    long(s.T), fused_s * 1e3, separate_s * 1e3, separate_s / fused_s);
        std::fflush(stdout);
      }
    }
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    const KernelTable& fused = registry.table(KernelOp::attention, dtype);
    for (const BenchCase& s : kCases) {
      if (s.doc_length != 0) continue;  // spans have no documents
      const Tensors x = make_tensors(s, dtype);
      run_span(fused, x, s.B, s.T, false);  // the saved out and lse the backward reads
      for (bool backward : {false, true}) {
        const double fused_s = median_seconds([&] { run_span(fused, x, s.B, s.T, backward); }, 0);
        const double ref_s = median_seconds([&] { run_span(ref::table(), x, 1, s.T, backward); }, kRefReps) * double(s.B);
        const double flops = 2.0 * (backward ? 5 : 2) * double(s.D) * double(s.B * s.H * s.T * s.T);
        const double gflops = flops / fused_s * 1e-9;
        std::printf(
            "RESULT attention_span %s %s B=%ld Tq=%ld Tk=%ld H=%ld K=%ld D=%ld fused_ms=%.3f ref_ms=%.1f "
            "ratio_vs_ref=%.1f GFLOP/s=%.1f %%gemm_peak=%.1f (%s config; fused=%s; ref timed on B=1, time x%ld)\n",
            backward ? "bwd" : "fwd", std::string(rf::dtype_name(dtype)).c_str(), long(s.B), long(s.T), long(s.T),
            long(s.H), long(s.K), long(s.D), fused_s * 1e3, ref_s * 1e3, ref_s / fused_s, gflops, 100.0 * gflops / peak,
            s.name, std::string(kernel_variant_name(fused.variant)).c_str(), long(s.B));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
