// The rollout path's kernels (issue #7), each against a baseline measured in the same run:
//  - paged attention decode: S sequences x one new token, context C, through a block table of 16-token
//    blocks in shuffled order; tokens/s and the GB/s of K and V read from the cache, as a fraction of
//    this machine's read bandwidth (a vectorised sum over a buffer as large as the cache, measured
//    first). And a prefill of one sequence, against the training attention kernel on the same shape.
//      RESULT paged_attention decode <dtype> S=.. C=.. H=.. K=.. D=.. time_ms=.. tokens/s=.. kv_GB/s=..
//        %read_bw=..
//      RESULT paged_attention prefill <dtype> T=.. H=.. K=.. D=.. time_ms=.. tokens/s=.. GFLOP/s=..
//        ratio_vs_flash=..   (flash time / paged time)
//  - linear layers at M = 1, 8, 64, 512 rows: the batch-invariant registry's linear_forward (oneDNN)
//    against the plain one on each library, and against invariance by construction, i.e. oneDNN always
//    called on row tiles padded to kTileRows (one primitive for every call, whatever the library does
//    inside; the cost of not trusting oneDNN's blocking).
//      RESULT linear <dtype> O=.. I=.. M=.. invariant_ms=.. onednn_ms=.. openblas_ms=..
//        tiled16_ms=.. ratio_invariant_vs_onednn=.. ratio_tiled_vs_onednn=.. weight_GB/s=.. GFLOP/s=..
//   usage: rollout_kernel_bench [--threads N]   (default: one thread per core)
// Timing: the median of 5-50 calls (about 0.3 s) after a warm-up call.
// Legend: S sequences, C context, T prefill tokens, H heads, K kv heads, D head dim, M rows, I in-features,
// O out-features, Z tokens per block.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_timing.h"
#include "core/philox.h"
#include "core/stopwatch.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/kernel_registry.h"

namespace {

using rf::DType;
using rf::Shape;
using rf::Tensor;
using rf::TensorView;
using namespace rf::kernels;

constexpr int64_t kZ = 16;
constexpr int64_t kTileRows = 16;

using rf::bench::seconds_of;

double median_seconds(const std::function<void()>& fn) { return rf::bench::median_seconds(fn, {5, 50, 0.3}); }

Tensor random(Shape shape, DType dtype, uint64_t seed, double low = -1.0, double high = 1.0) {
  Tensor t(shape, dtype);
  rf::fill_uniform(t, rf::Philox(seed, 0), low, high);
  return t;
}

// This machine's read bandwidth: the best of a few vectorised f32 sums over `bytes` bytes.
double read_bandwidth_gbs(int64_t bytes) {
  const Tensor buffer = random({bytes / 4}, DType::f32, 99);
  const float* x = buffer.data<float>();
  const int64_t n = bytes / 4;
  double best = 1e30;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    best = std::min(best, seconds_of([&] {
      float total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
      for (int64_t i = 0; i < n; i += 4096) {
        float part[16] = {};
        const int64_t end = std::min(n, i + 4096);
        for (int64_t j = i; j + 16 <= end; j += 16)
#pragma omp simd
          for (int l = 0; l < 16; ++l) part[l] += x[j + l];
        for (float p : part) total += p;
      }
      sink = total;
    }));
  }
  (void)sink;
  return double(bytes) / best * 1e-9;
}

struct PagedShape {
  int64_t S, C, H, K, D;
};

// A cache holding S sequences of C tokens in shuffled blocks, and one decode query per sequence.
struct DecodeInputs {
  Tensor k_cache, v_cache, q, out, table;
  std::vector<int32_t> query_start, context_len;
};

DecodeInputs make_decode(const PagedShape& p, DType dtype, int64_t q_per_seq) {
  const int64_t blocks_per_seq = (p.C + kZ - 1) / kZ, P = p.S * blocks_per_seq;
  DecodeInputs in{random({P, kZ, p.K, p.D}, dtype, 1), random({P, kZ, p.K, p.D}, dtype, 2),
                  random({p.S * q_per_seq, p.H, p.D}, dtype, 3), Tensor({p.S * q_per_seq, p.H, p.D}, dtype),
                  Tensor({p.S, blocks_per_seq}, DType::i32), {}, {}};
  std::vector<int32_t> ids(static_cast<size_t>(P));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(4));
  std::copy(ids.begin(), ids.end(), in.table.data<int32_t>());
  for (int64_t s = 0; s <= p.S; ++s) in.query_start.push_back(int32_t(s * q_per_seq));
  in.context_len.assign(size_t(p.S), int32_t(p.C));
  return in;
}

void bench_paged_decode(const KernelRegistry& k, const PagedShape& p, DType dtype, double read_gbs) {
  const DecodeInputs in = make_decode(p, dtype, 1);
  const PagedAttentionParams params{0.0, in.query_start, in.context_len, in.table};
  const double seconds = median_seconds([&] { k.paged_attention_forward(params, in.q, in.k_cache, in.v_cache, in.out); });
  const double kv_bytes = 2.0 * double(p.S * p.C * p.K * p.D) * double(rf::dtype_size(dtype));
  const double gbs = kv_bytes / seconds * 1e-9;
  std::printf("RESULT paged_attention decode %s S=%ld C=%ld H=%ld K=%ld D=%ld time_ms=%.3f tokens/s=%.0f "
              "kv_GB/s=%.2f %%read_bw=%.1f\n",
              rf::dtype_name(dtype).data(), long(p.S), long(p.C), long(p.H), long(p.K), long(p.D), seconds * 1e3,
              double(p.S) / seconds, gbs, 100.0 * gbs / read_gbs);
  std::fflush(stdout);
}

// One sequence's whole prefill of T tokens: paged (its keys in the cache) against the training kernel.
void bench_paged_prefill(const KernelRegistry& k, const PagedShape& p, DType dtype) {
  const int64_t T = p.C;
  const DecodeInputs in = make_decode({1, T, p.H, p.K, p.D}, dtype, T);
  const PagedAttentionParams params{0.0, in.query_start, in.context_len, in.table};
  const double paged = median_seconds([&] { k.paged_attention_forward(params, in.q, in.k_cache, in.v_cache, in.out); });
  const Tensor q = random({1, T, p.H, p.D}, dtype, 5), kk = random({1, T, p.K, p.D}, dtype, 6),
               v = random({1, T, p.K, p.D}, dtype, 7), out({1, T, p.H, p.D}, dtype), lse({1, p.H, T}, DType::f32);
  const double flash = median_seconds([&] { k.attention_forward({}, q, kk, v, out, lse); });
  const double flops = 4.0 * double(p.H * p.D) * double(T * (T + 1) / 2);
  std::printf("RESULT paged_attention prefill %s T=%ld H=%ld K=%ld D=%ld time_ms=%.3f tokens/s=%.0f GFLOP/s=%.1f "
              "ratio_vs_flash=%.2f\n",
              rf::dtype_name(dtype).data(), long(T), long(p.H), long(p.K), long(p.D), paged * 1e3, double(T) / paged,
              flops / paged * 1e-9, flash / paged);
  std::fflush(stdout);
}

// y = x w^T on row tiles of kTileRows rows, the last one zero-padded: every oneDNN call has the same
// shape, so a row's arithmetic cannot depend on M whatever oneDNN's blocking heuristics do.
void linear_tiled(const KernelRegistry& k, TensorView x_MI, TensorView w_OI, TensorView y_MO, Tensor& x_tile,
                  Tensor& y_tile) {
  const int64_t M = x_MI.size(0);
  for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
    const int64_t rows = std::min(kTileRows, M - m0);
    if (rows == kTileRows) {
      k.linear_forward(x_MI.slice(0, m0, rows), w_OI, TensorView(), y_MO.slice(0, m0, rows));
      continue;
    }
    rf::copy_convert(x_MI.slice(0, m0, rows), x_tile.view().slice(0, 0, rows));
    k.linear_forward(x_tile, w_OI, TensorView(), y_tile);
    rf::copy_convert(y_tile.view().slice(0, 0, rows), y_MO.slice(0, m0, rows));
  }
}

void bench_linear(int64_t O, int64_t I, DType dtype) {
  const KernelRegistry invariant(KernelConfig{.batch_invariant = true});
  const KernelRegistry onednn, openblas(KernelConfig{.f32_gemm = GemmLibrary::openblas});
  const Tensor w = random({O, I}, dtype, 11, -0.05, 0.05);
  Tensor x_tile({kTileRows, I}, dtype), y_tile({kTileRows, O}, dtype);
  for (int64_t M : {1, 8, 64, 512}) {
    const Tensor x = random({M, I}, dtype, 12), y({M, O}, dtype);
    auto time = [&](const KernelRegistry& k) {
      return median_seconds([&] { k.linear_forward(x, w, TensorView(), y); });
    };
    const double t_invariant = time(invariant), t_onednn = time(onednn);
    const double t_openblas = dtype == DType::f32 ? time(openblas) : 0.0;
    const double t_tiled = median_seconds([&] { linear_tiled(onednn, x, w, y, x_tile, y_tile); });
    const double weight_bytes = double(O * I) * double(rf::dtype_size(dtype));
    std::printf("RESULT linear %s O=%ld I=%ld M=%ld invariant_ms=%.4f onednn_ms=%.4f openblas_ms=%s tiled%ld_ms=%.4f "
                "ratio_invariant_vs_onednn=%.2f ratio_tiled_vs_onednn=%.2f weight_GB/s=%.2f GFLOP/s=%.1f\n",
                rf::dtype_name(dtype).data(), long(O), long(I), long(M), t_invariant * 1e3, t_onednn * 1e3,
                dtype == DType::f32 ? fmt::format("{:.4f}", t_openblas * 1e3).c_str() : "n/a", long(kTileRows),
                t_tiled * 1e3, t_invariant / t_onednn, t_tiled / t_onednn, weight_bytes / t_invariant * 1e-9,
                2.0 * double(M * O * I) / t_invariant * 1e-9);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = rf::bench::parse_threads(argc, argv);
  if (threads < 0) {
    std::fprintf(stderr, "usage: rollout_kernel_bench [--threads N]   (N = 0: one thread per core)\n");
    return 2;
  }
  const rf::ThreadPool pool(threads, "--threads");
  const KernelRegistry registry(KernelConfig{.batch_invariant = true});
  std::printf("# %s\n", pool.describe().c_str());
  const std::string setup = registry.describe();
  for (size_t begin = 0; begin < setup.size();) {
    const size_t end = std::min(setup.find('\n', begin), setup.size());
    std::printf("# %.*s\n", int(end - begin), setup.data() + begin);
    begin = end + 1;
  }
  const rf::Stopwatch total;

  constexpr PagedShape kDecode[] = {{64, 512, 16, 4, 64}, {64, 512, 16, 4, 128}, {64, 512, 16, 8, 128}};
  const double read_gbs = read_bandwidth_gbs(int64_t(2) * 64 * 512 * 4 * 128 * 4);
  std::printf("RESULT read_bandwidth GB/s=%.2f\n", read_gbs);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const PagedShape& p : kDecode) bench_paged_decode(registry, p, dtype, read_gbs);
    bench_paged_prefill(registry, {1, 512, 16, 4, 128}, dtype);
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    bench_linear(1024, 1024, dtype);
    bench_linear(4096, 1024, dtype);
  }
  std::printf("# total %.1f s\n", total.seconds());
  return 0;
}
