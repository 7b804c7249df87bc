// Fast causal GQA attention on the CPU: f32 arithmetic (bf16 inputs widened on load, outputs
// rounded to bf16), loops over contiguous f32 copies that the compiler vectorises, OpenMP over
// independent (row, kv head, block) tasks. It keeps the ref kernel's structure (a query's full
// score row, then its softmax) rather than tiling with an online softmax: that is the flash
// kernel's job.
//
// A task widens the keys and values it needs once: transposed (dim-major) for the dot products
// with a query, so keys run along the vector lanes and no horizontal sums are needed, and
// row-major where rows are summed with weights (P V, dS K).
//
// Every output row is written by exactly one task that sums in a fixed order, so results are
// bitwise identical whatever the thread count:
//  - forward and dQ: one task per (b, kv head, block of queries) covering the group's query heads;
//  - dK, dV: one task per (b, kv head, block of keys), looping over the queries that see them.
// Backward recomputes the probabilities from the saved lse (exp is evaluated twice, once per pass).
// Legend: B batch, T sequence, H query heads, K kv heads, D head dim; S keys held by a task.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention_args.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kQueryBlock = 32;  // queries per forward / dQ task
constexpr int64_t kKeyBlock = 32;    // keys per dK / dV task
// Below this many score multiply-adds a call runs on one thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = int64_t(1) << 15;

// Multiply-adds of the causal scores if each row were one document (an upper bound).
int64_t score_work(const AttentionDims& dims) { return dims.B * dims.H * dims.T * (dims.T + 1) / 2 * dims.D; }

// Row (i0, i1, i2) of a rank-4 view whose inner dim is contiguous.
template <class E>
struct Rows {
  explicit Rows(const TensorView& x) : base(x.data<E>()), s0(x.stride(0)), s1(x.stride(1)), s2(x.stride(2)) {}
  E* operator()(int64_t i0, int64_t i1, int64_t i2) const { return base + i0 * s0 + i1 * s1 + i2 * s2; }
  E* base;
  int64_t s0, s1, s2;
};

// The lse_BHT view (f32, any strides).
struct LseRows {
  explicit LseRows(const TensorView& x) : base(x.data<float>()), s0(x.stride(0)), s1(x.stride(1)), s2(x.stride(2)) {}
  float& operator()(int64_t b, int64_t h, int64_t t) const { return base[b * s0 + h * s1 + t * s2]; }
  float* base;
  int64_t s0, s1, s2;
};

template <class E>
void load_row(const E* src, float factor, float* dst, int64_t D) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) dst[d] = load(src[d]) * factor;
}

template <class E>
void store_row(const float* src, float factor, E* dst, int64_t D) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) store(dst[d], src[d] * factor);
}

// Rows [s0, s1) of kv head kv of row b, widened: row-major into rows_SD (row s at s - s0).
template <class E>
void load_rows(const Rows<E>& x, int64_t b, int64_t kv, int64_t s0, int64_t s1, int64_t D, float* rows_SD) {
  for (int64_t s = s0; s < s1; ++s) load_row(x(b, s, kv), 1.0f, rows_SD + (s - s0) * D, D);
}

// The same rows transposed into cols_DS: dim d of row s at d * (s1 - s0) + (s - s0).
template <class E>
void load_transposed(const Rows<E>& x, int64_t b, int64_t kv, int64_t s0, int64_t s1, int64_t D, float* cols_DS) {
  const int64_t ld = s1 - s0;
  for (int64_t s = s0; s < s1; ++s) {
    const E* row = x(b, s, kv);
    for (int64_t d = 0; d < D; ++d) cols_DS[d * ld + (s - s0)] = load(row[d]);
  }
}

float dot(const float* x, const float* y, int64_t D) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < D; ++d) sum += x[d] * y[d];
  return sum;
}

void axpy(float alpha, const float* x, float* y, int64_t D) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) y[d] += alpha * x[d];
}

// dots_S[i] = x . (column i of cols_DS) for i < n, where column i holds dims at stride ld. Keys
// run along the vector lanes, so there are no horizontal sums; four dims per sweep give four
// multiply-adds per load and store of dots_S.
void column_dots(const float* x_D, const float* cols_DS, int64_t ld, int64_t n, int64_t D, float* dots_S) {
  std::fill(dots_S, dots_S + n, 0.0f);
  int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    const float x0 = x_D[d], x1 = x_D[d + 1], x2 = x_D[d + 2], x3 = x_D[d + 3];
    const float* c0 = cols_DS + d * ld;
    const float* c1 = c0 + ld;
    const float* c2 = c1 + ld;
    const float* c3 = c2 + ld;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dots_S[i] += x0 * c0[i] + x1 * c1[i] + x2 * c2[i] + x3 * c3[i];
  }
  for (; d < D; ++d) {
    const float x0 = x_D[d];
    const float* c0 = cols_DS + d * ld;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dots_S[i] += x0 * c0[i];
  }
}

// acc_D += sum_{i < n} w_S[i] * rows_SD[i]; four rows per sweep over acc_D.
void add_weighted_rows(const float* w_S, const float* rows_SD, int64_t n, int64_t D, float* acc_D) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float w0 = w_S[i], w1 = w_S[i + 1], w2 = w_S[i + 2], w3 = w_S[i + 3];
    const float* r0 = rows_SD + i * D;
    const float* r1 = r0 + D;
    const float* r2 = r1 + D;
    const float* r3 = r2 + D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) acc_D[d] += w0 * r0[d] + w1 * r1[d] + w2 * r2[d] + w3 * r3[d];
  }
  for (; i < n; ++i) axpy(w_S[i], rows_SD + i * D, acc_D, D);
}

// p_S[i] = exp(p_S[i] - shift) for i < n; returns their sum. The shift is the row's largest score
// (forward) or its lse >= that score (backward, the same scores recomputed), so the exponents are
// <= 0, up to rounding.
float exp_shifted(float* p_S, int64_t n, float shift) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    p_S[i] = exp_nonpositive(p_S[i] - shift);
    sum += p_S[i];
  }
  return sum;
}

template <class E>
void forward_impl(const AttentionParams& params, const AttentionDims& dims, const TensorView& q_BTHD,
                  const TensorView& k_BTKD, const TensorView& v_BTKD, const TensorView& out_BTHD,
                  const TensorView& lse_BHT) {
  // Plain locals rather than a structured binding: OpenMP regions below use them.
  const int64_t B = dims.B, T = dims.T, H = dims.H, K = dims.K, D = dims.D;
  const float scale = float(dims.scale);
  const int64_t group = H / K;
  const int64_t num_blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const Rows<E> q_rows(q_BTHD), k_rows(k_BTKD), v_rows(v_BTKD), out_rows(out_BTHD);
  const LseRows lse(lse_BHT);
#pragma omp parallel if (score_work(dims) >= kMinParallelWork)
  {
    // Per-thread scratch, allocated once per call: the f32 keys (transposed) and values one task
    // can see (up to a whole row), one query's probabilities and its output accumulator.
    std::vector<float> kt_DS(static_cast<size_t>(T * D)), v_SD(static_cast<size_t>(T * D));
    std::vector<float> p_S(static_cast<size_t>(T)), q_D(static_cast<size_t>(D)), acc_D(static_cast<size_t>(D));
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t kv = 0; kv < K; ++kv) {
        for (int64_t block = 0; block < num_blocks; ++block) {
          const int64_t t0 = block * kQueryBlock, t1 = std::min(T, t0 + kQueryBlock);
          // Document starts never decrease, so the block's first query sees the earliest key.
          const int64_t lo = document_of(params.cu_seqlens, b, T, t0).start, ld = t1 - lo;
          load_transposed(k_rows, b, kv, lo, t1, D, kt_DS.data());
          load_rows(v_rows, b, kv, lo, t1, D, v_SD.data());
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t start = document_of(params.cu_seqlens, b, T, t).start, n = t - start + 1;
            for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
              load_row(q_rows(b, t, h), scale, q_D.data(), D);
              column_dots(q_D.data(), &kt_DS[size_t(start - lo)], ld, n, D, p_S.data());
              float max_score = p_S[0];
#pragma omp simd reduction(max : max_score)
              for (int64_t i = 0; i < n; ++i) max_score = std::max(max_score, p_S[size_t(i)]);
              const float sum_exp = exp_shifted(p_S.data(), n, max_score);
              std::fill(acc_D.begin(), acc_D.end(), 0.0f);
              add_weighted_rows(p_S.data(), &v_SD[size_t((start - lo) * D)], n, D, acc_D.data());
              store_row(acc_D.data(), 1.0f / sum_exp, out_rows(b, t, h), D);
              lse(b, h, t) = max_score + std::log(sum_exp);
            }
          }
        }
      }
    }
  }
}

template <class E>
void backward_impl(const AttentionParams& params, const AttentionDims& dims, const TensorView& q_BTHD,
                   const TensorView& k_BTKD, const TensorView& v_BTKD, const TensorView& out_BTHD,
                   const TensorView& lse_BHT, const TensorView& dout_BTHD, const TensorView& dq_BTHD,
                   const TensorView& dk_BTKD, const TensorView& dv_BTKD) {
  const int64_t B = dims.B, T = dims.T, H = dims.H, K = dims.K, D = dims.D;
  const float scale = float(dims.scale);
  const int64_t group = H / K;
  const int64_t num_query_blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const int64_t num_key_blocks = (T + kKeyBlock - 1) / kKeyBlock;
  const Rows<E> q_rows(q_BTHD), k_rows(k_BTKD), v_rows(v_BTKD), out_rows(out_BTHD), dout_rows(dout_BTHD);
  const Rows<E> dq_rows(dq_BTHD), dk_rows(dk_BTKD), dv_rows(dv_BTKD);
  const LseRows lse(lse_BHT);
  // delta_BHT = rowsum(dO * O): written by the dQ pass, read by the dK/dV pass for every query.
  // Per-call scratch (B*H*T floats) because the passes hand it over.
  std::vector<float> delta_BHT(static_cast<size_t>(B * H * T));
  auto delta = [&](int64_t b, int64_t h, int64_t t) -> float& { return delta_BHT[size_t((b * H + h) * T + t)]; };
#pragma omp parallel if (score_work(dims) >= kMinParallelWork)
  {
    // Per-thread scratch, allocated once per call: the f32 keys and values one task can see
    // (transposed, plus the keys row-major for dQ), one query's probabilities and their
    // gradients, its q (scaled), dO, O and dQ, and the dK/dV accumulators of one key block.
    std::vector<float> kt_DS(static_cast<size_t>(T * D)), vt_DS(static_cast<size_t>(T * D));
    std::vector<float> k_SD(static_cast<size_t>(T * D));
    std::vector<float> p_S(static_cast<size_t>(T)), ds_S(static_cast<size_t>(T));
    std::vector<float> q_D(static_cast<size_t>(D)), dout_D(static_cast<size_t>(D));
    std::vector<float> out_D(static_cast<size_t>(D)), dq_D(static_cast<size_t>(D));
    std::vector<float> dk_SD(static_cast<size_t>(kKeyBlock * D)), dv_SD(static_cast<size_t>(kKeyBlock * D));
    // For the n keys in columns [first, first + n) of kt_DS / vt_DS (row stride ld) seen by one
    // (query, head): P into p_S and dS = P * (dP - delta) into ds_S.
    auto probability_grads = [&](int64_t first, int64_t ld, int64_t n, float row_lse, float row_delta) {
      column_dots(q_D.data(), &kt_DS[size_t(first)], ld, n, D, p_S.data());
      exp_shifted(p_S.data(), n, row_lse);
      column_dots(dout_D.data(), &vt_DS[size_t(first)], ld, n, D, ds_S.data());
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) ds_S[size_t(i)] = p_S[size_t(i)] * (ds_S[size_t(i)] - row_delta);
    };

    // Pass 1: delta and dQ = scale * sum_s dS_s k_s, one task per (b, kv head, query block).
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t kv = 0; kv < K; ++kv) {
        for (int64_t block = 0; block < num_query_blocks; ++block) {
          const int64_t t0 = block * kQueryBlock, t1 = std::min(T, t0 + kQueryBlock);
          const int64_t lo = document_of(params.cu_seqlens, b, T, t0).start, ld = t1 - lo;
          load_transposed(k_rows, b, kv, lo, t1, D, kt_DS.data());
          load_transposed(v_rows, b, kv, lo, t1, D, vt_DS.data());
          load_rows(k_rows, b, kv, lo, t1, D, k_SD.data());
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t start = document_of(params.cu_seqlens, b, T, t).start, n = t - start + 1;
            for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
              load_row(q_rows(b, t, h), scale, q_D.data(), D);
              load_row(dout_rows(b, t, h), 1.0f, dout_D.data(), D);
              load_row(out_rows(b, t, h), 1.0f, out_D.data(), D);
              const float row_delta = dot(dout_D.data(), out_D.data(), D);
              delta(b, h, t) = row_delta;
              probability_grads(start - lo, ld, n, lse(b, h, t), row_delta);
              std::fill(dq_D.begin(), dq_D.end(), 0.0f);
              add_weighted_rows(ds_S.data(), &k_SD[size_t((start - lo) * D)], n, D, dq_D.data());
              store_row(dq_D.data(), scale, dq_rows(b, t, h), D);
            }
          }
        }
      }
    }
    // (the implicit barrier above: pass 2 reads the delta of every query)

    // Pass 2: dK = scale * sum dS^T q and dV = sum P^T dO over the group's heads, one task per
    // (b, kv head, key block); the task owns those dK/dV rows.
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t kv = 0; kv < K; ++kv) {
        for (int64_t block = 0; block < num_key_blocks; ++block) {
          const int64_t s0 = block * kKeyBlock, s1 = std::min(T, s0 + kKeyBlock), ld = s1 - s0;
          load_transposed(k_rows, b, kv, s0, s1, D, kt_DS.data());
          load_transposed(v_rows, b, kv, s0, s1, D, vt_DS.data());
          std::fill(dk_SD.begin(), dk_SD.end(), 0.0f);
          std::fill(dv_SD.begin(), dv_SD.end(), 0.0f);
          // Queries past the document of the block's last key see none of its keys.
          const int64_t t_end = document_of(params.cu_seqlens, b, T, s1 - 1).end;
          for (int64_t t = s0; t < t_end; ++t) {
            // Query t sees the block's keys [j0, j1).
            const int64_t j0 = std::max(s0, document_of(params.cu_seqlens, b, T, t).start);
            const int64_t j1 = std::min(s1, t + 1);
            if (j0 >= j1) continue;
            for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
              load_row(q_rows(b, t, h), scale, q_D.data(), D);
              load_row(dout_rows(b, t, h), 1.0f, dout_D.data(), D);
              probability_grads(j0 - s0, ld, j1 - j0, lse(b, h, t), delta(b, h, t));
              for (int64_t j = j0; j < j1; ++j) {
                // q_D already carries the scale: dK_j += scale * dS_j * q.
                axpy(ds_S[size_t(j - j0)], q_D.data(), &dk_SD[size_t((j - s0) * D)], D);
                axpy(p_S[size_t(j - j0)], dout_D.data(), &dv_SD[size_t((j - s0) * D)], D);
              }
            }
          }
          for (int64_t s = s0; s < s1; ++s) {
            store_row(&dk_SD[size_t((s - s0) * D)], 1.0f, dk_rows(b, s, kv), D);
            store_row(&dv_SD[size_t((s - s0) * D)], 1.0f, dv_rows(b, s, kv), D);
          }
        }
      }
    }
  }
}

void check_cpu_dtype(DType dtype) {
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16, "cpu attention: f32 or bf16 inputs, got {}", dtype_name(dtype));
}

}  // namespace

void attention_forward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                       TensorView out_BTHD, TensorView lse_BHT) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  check_cpu_dtype(q_BTHD.dtype());
  if (q_BTHD.dtype() == DType::f32)
    forward_impl<float>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  else
    forward_impl<bf16>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
}

void attention_backward(const AttentionParams& params, TensorView q_BTHD, TensorView k_BTKD, TensorView v_BTKD,
                        TensorView out_BTHD, TensorView lse_BHT, TensorView dout_BTHD, TensorView dq_BTHD,
                        TensorView dk_BTKD, TensorView dv_BTKD) {
  const AttentionDims dims = check_attention_args(params, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT);
  check_attention_grads(dims, q_BTHD.dtype(), dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
  check_cpu_dtype(q_BTHD.dtype());
  if (q_BTHD.dtype() == DType::f32)
    backward_impl<float>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
  else
    backward_impl<bf16>(params, dims, q_BTHD, k_BTKD, v_BTKD, out_BTHD, lse_BHT, dout_BTHD, dq_BTHD, dk_BTKD, dv_BTKD);
}

}  // namespace rf::kernels::RF_CPU_NS
