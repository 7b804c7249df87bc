// The ordered GEMM (contract in ordered_gemm.h). Goto's blocking: c is cut into tasks of a column block
// (at most kNcMax wide) times a range of rows. A task packs its whole b column block once, k-major in
// slices of kKc (widening bf16 to f32, zero-padding ragged columns), then walks its rows kMc at a time:
// packs the a rows slice by slice and runs the register tile over each slice into an f32 accumulator
// block that carries each element's fma chain from one k slice to the next, exactly. The epilogue then
// rounds the block into c. Block sizes and the split into tasks change which thread computes an element,
// never how: any M, N, thread count or variant gives the same bits.
// Legend: a_MK, b_KN, c_MN as in BLAS; a row block is m0..m0+mb, a column block n0..n0+nb.
#include "kernels/cpu/ordered_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/ordered_microkernel.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kKc = 256;                       // k slice: a b micro-panel (kKc x kNr) stays in L1
constexpr int64_t kMc = 8 * kMr;                   // rows per block: the packed a slice (kMc x kKc) stays in L2
constexpr int64_t kNcMax = 16 * kNr;               // columns per block at most
constexpr int64_t kMaxPackedB = int64_t(1) << 20;  // floats of a task's packed b (4 MiB): narrows blocks for long K
constexpr int64_t kMinParallelFlops = int64_t(1) << 18;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// A task's scratch, 64-byte aligned (the tile loads whole cache lines of b), grown on demand and
// kept per thread so that steady-state calls do not allocate.
class Scratch {
 public:
  float* get(size_t floats) {
    if (floats > capacity_) {
      capacity_ = round_up(int64_t(floats), 16);
      data_.reset(static_cast<float*>(std::aligned_alloc(64, capacity_ * sizeof(float))));
      RF_CHECK(data_ != nullptr, "ordered gemm: cannot allocate {} bytes of scratch", capacity_ * sizeof(float));
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

struct TaskScratch {
  Scratch a, b, acc;
};

// Element (r, k) of a 2-D view with unit stride in one dim: data + r * s0 + k * s1.
struct Strided {
  const void* data;
  int64_t s0, s1;
  Strided transposed() const { return {data, s1, s0}; }
};

#if defined(__AVX2__)
__m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__m256 load8(const bf16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// out[k * out_ld + i] = src[i * src_ld + k] for i, k < 8, in registers (unpack, shuffle, lane permute).
template <class T>
void transpose8x8(const T* src, int64_t src_ld, float* out, int64_t out_ld) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = load8(src + i * src_ld);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(out + k * out_ld, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
    _mm256_storeu_ps(out + (k + 4) * out_ld, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
  }
}
#endif

// Rows r0..r0+rb and k k0..k0+kc of x (a rows x k view) -> k-major panels of `width` rows:
// out[(p * kc + k) * width + i], rows past rb zero. Packs a (x = a_MK, width kMr) and b (x = b_KN
// transposed, width kNr) alike.
template <class T, int64_t width>
void pack_panels(const Strided& x, int64_t r0, int64_t rb, int64_t k0, int64_t kc, float* out) {
  const T* base = static_cast<const T*>(x.data);
  for (int64_t p0 = 0; p0 < rb; p0 += width) {
    const int64_t rows = std::min(width, rb - p0);
    float* panel = out + p0 * kc;
    if (rows < width) std::fill_n(panel, kc * width, 0.0f);
    if (x.s0 == 1) {  // the panel's rows are contiguous for each k: copy
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = base + (k0 + k) * x.s1 + (r0 + p0);
        for (int64_t i = 0; i < rows; ++i) panel[k * width + i] = load(src[i]);
      }
      continue;
    }
    // Each row is contiguous in k (x row-major; a weight w_OI read as b = w^T): transpose.
    int64_t i0 = 0;
#if defined(__AVX2__)
    for (; i0 + 8 <= rows; i0 += 8) {
      const T* src = base + (r0 + p0 + i0) * x.s0 + k0;
      int64_t k = 0;
      for (; k + 8 <= kc; k += 8) transpose8x8(src + k, x.s0, panel + k * width + i0, width);
      for (int64_t i = 0; i < 8; ++i)
        for (int64_t kk = k; kk < kc; ++kk) panel[kk * width + i0 + i] = load(src[i * x.s0 + kk]);
    }
#endif
    for (int64_t i = i0; i < rows; ++i) {
      const T* src = base + (r0 + p0 + i) * x.s0 + k0;
      for (int64_t k = 0; k < kc; ++k) panel[k * width + i] = load(src[k]);
    }
  }
}

struct Problem {
  Strided a, b;
  DType in_dtype, out_dtype;
  TensorView c;
  float alpha;
  const MatmulEpilogue* epilogue;
  int64_t M, N, K;
};

// c block = epilogue(acc block), the contract's order of operations.
template <class TIn, class TOut>
void finish_block(const Problem& p, const float* acc, int64_t ld_acc, int64_t m0, int64_t mb, int64_t n0,
                  int64_t nb) {
  const MatmulEpilogue& e = *p.epilogue;
  TOut* c = p.c.data<TOut>();
  const int64_t ldc = p.c.stride(0);
  const TIn* bias = e.bias_N.empty() ? nullptr : e.bias_N.data<TIn>();
  const int64_t bias_stride = bias ? e.bias_N.stride(0) : 0;
  const TOut* addend = e.addend_MN.empty() ? nullptr : e.addend_MN.data<TOut>();
  const int64_t ld_addend = addend ? e.addend_MN.stride(0) : 0;
  for (int64_t i = 0; i < mb; ++i) {
    TOut* c_row = c + (m0 + i) * ldc + n0;
    const float* acc_row = acc + i * ld_acc;
    for (int64_t j = 0; j < nb; ++j) {
      float r = acc_row[j];
      if (p.alpha != 1.0f) r = p.alpha * r;
      if (e.beta != 0.0f) r = r + e.beta * load(c_row[j]);
      if (bias) r = r + load(bias[(n0 + j) * bias_stride]);
      if (addend) r = r + load(addend[(m0 + i) * ld_addend + n0 + j]);
      store(c_row[j], r);
    }
  }
}

// The task of rows m_begin..m_end and columns n0..n0+nb: b packed once, then kMc rows at a time.
template <class TIn, class TOut>
void run_task(const Problem& p, TaskScratch& scratch, int64_t m_begin, int64_t m_end, int64_t n0, int64_t nb) {
  const int64_t nb_padded = round_up(nb, kNr);
  const int64_t num_slices = (p.K + kKc - 1) / kKc;
  float* packed_b = scratch.b.get(size_t(std::max<int64_t>(nb_padded * p.K, 1)));
  for (int64_t s = 0; s < num_slices; ++s) {
    const int64_t k0 = s * kKc, kc = std::min(kKc, p.K - k0);
    pack_panels<TIn, kNr>(p.b.transposed(), n0, nb, k0, kc, packed_b + k0 * nb_padded);
  }
  float* packed_a = scratch.a.get(size_t(kMc * std::min(kKc, std::max<int64_t>(p.K, 1))));
  float* acc = scratch.acc.get(size_t(kMc * nb_padded));
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kMc) {
    const int64_t mb = std::min(kMc, m_end - m0), mb_padded = round_up(mb, kMr);
    if (p.K == 0) std::fill_n(acc, mb_padded * nb_padded, 0.0f);
    for (int64_t s = 0; s < num_slices; ++s) {
      const int64_t k0 = s * kKc, kc = std::min(kKc, p.K - k0);
      pack_panels<TIn, kMr>(p.a, m0, mb, k0, kc, packed_a);
      const float* b_slice = packed_b + k0 * nb_padded;
      for (int64_t q0 = 0; q0 < nb_padded; q0 += kNr)
        for (int64_t p0 = 0; p0 < mb_padded; p0 += kMr)
          ordered_tile(kc, packed_a + p0 * kc, b_slice + q0 * kc, acc + p0 * nb_padded + q0, nb_padded, s > 0);
    }
    finish_block<TIn, TOut>(p, acc, nb_padded, m0, mb, n0, nb);
  }
}

template <class TIn, class TOut>
void run(const Problem& p) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Column blocks as wide as the packed-b budget allows, narrower when they are too few to keep every
  // thread busy; then rows split in whole row blocks if there are still too few tasks.
  int64_t nc = std::min({kNcMax, round_up(p.N, kNr), std::max(kNr, kMaxPackedB / std::max<int64_t>(p.K, 1) / kNr * kNr)});
  while (nc > kNr && (p.N + nc - 1) / nc < 2 * threads && p.M <= kMc) nc = round_up(nc / 2, kNr);
  const int64_t num_col_blocks = (p.N + nc - 1) / nc, num_row_blocks = (p.M + kMc - 1) / kMc;
  const int64_t row_splits = std::clamp<int64_t>((2 * threads + num_col_blocks - 1) / num_col_blocks, 1, num_row_blocks);
  const int64_t rows_per_task = (num_row_blocks + row_splits - 1) / row_splits * kMc;
  const int64_t num_tasks = num_col_blocks * row_splits;
  const bool parallel = 2 * p.M * p.N * std::max<int64_t>(p.K, 1) >= kMinParallelFlops && num_tasks > 1;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t t = 0; t < num_tasks; ++t) {
    thread_local TaskScratch scratch;
    const int64_t m_begin = (t / num_col_blocks) * rows_per_task, n0 = (t % num_col_blocks) * nc;
    if (m_begin < p.M)
      run_task<TIn, TOut>(p, scratch, m_begin, std::min(p.M, m_begin + rows_per_task), n0, std::min(nc, p.N - n0));
  }
}

Strided strided(const TensorView& m) {
  RF_CHECK(m.stride(1) == 1 || m.stride(0) == 1 || m.size(0) == 1 || m.size(1) == 1,
           "ordered gemm: operand is neither row- nor column-major: {}", m.describe());
  // A dim of extent 1 is never stepped along: give it the stride that picks the packing path reading
  // the other dim contiguously.
  int64_t s0 = m.stride(0), s1 = m.stride(1);
  if (m.size(1) == 1 && s0 != 1) s1 = 1;
  if (m.size(0) == 1 && s1 != 1) s0 = 1;
  return {m.raw(), s0, s1};
}

}  // namespace

void ordered_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue) {
  const Problem p{strided(a_MK), strided(b_KN), a_MK.dtype(), c_MN.dtype(), c_MN,
                  alpha, &epilogue, c_MN.size(0), c_MN.size(1), a_MK.size(1)};
  if (p.M == 0 || p.N == 0) return;
  RF_CHECK(p.in_dtype == b_KN.dtype() && (p.in_dtype == DType::f32 || p.in_dtype == DType::bf16) &&
               (p.out_dtype == DType::f32 || p.out_dtype == DType::bf16),
           "ordered gemm: takes f32 or bf16 operands into f32 or bf16, got {} x {} -> {}", dtype_name(p.in_dtype),
           dtype_name(b_KN.dtype()), dtype_name(p.out_dtype));
  const bool in_bf16 = p.in_dtype == DType::bf16, out_bf16 = p.out_dtype == DType::bf16;
  if (!in_bf16 && !out_bf16) return run<float, float>(p);
  if (!in_bf16 && out_bf16) return run<float, bf16>(p);
  if (in_bf16 && !out_bf16) return run<bf16, float>(p);
  return run<bf16, bf16>(p);
}

}  // namespace rf::kernels::RF_CPU_NS
