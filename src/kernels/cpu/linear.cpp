// Fast GEMM and linear layers on one of three GEMM engines (KernelConfig picks per dtype):
//  - oneDNN's matmul (onednn_matmul.h), f32 and bf16 where oneDNN has a bf16 kernel (AVX-512 cores);
//  - OpenBLAS's cblas_sgemm, f32 only (the `_openblas` table);
//  - the ordered GEMM (ordered_gemm.h), ours: one fixed reduction order per element whatever the
//    batch, threads or ISA; the batch-invariant registry's GEMM and bf16 on CPUs without AVX-512.
// Every op is one matrix product on 2-D views whose layout is read from their strides, so the
// transposes of the linear backward cost nothing. What is ours beyond the ordered GEMM: the OpenBLAS
// path's bias and residual add (folded into the GEMM as beta = 1) and the bias-gradient column sum.
// The grouped GEMM of the MoE experts (moe.h) is here too: fixed tiles of every expert's product, each one
// single-threaded product on the same engine or, for an expert of few rows, on our own kernels
// (grouped_few_rows.h), all in one parallel region (grouped_tiles.h).
// f64 is not here: the registry sends it to `ref`.
// Legend: N rows (tokens), I in-features, O out-features; a GEMM's operands are a_MK, b_KN, c_MN.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/grouped_few_rows.h"
#include "kernels/cpu/grouped_tiles.h"
#include "kernels/cpu/onednn_matmul.h"
#include "kernels/cpu/ordered_gemm.h"
#include "kernels/linear_args.h"
#include "kernels/moe_args.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

// Below this many elements a memory-bound pass runs on one thread: forking costs more.
constexpr int64_t kParallelGrain = int64_t(1) << 15;

// The cpu kernels take f32 x f32 -> f32 and bf16 x bf16 -> f32 or bf16.
void check_dtypes(DType a, DType b, DType c, const char* what) {
  const bool ok = a == b && ((a == DType::f32 && c == DType::f32) ||
                             (a == DType::bf16 && (c == DType::f32 || c == DType::bf16)));
  RF_CHECK(ok, "{}: cpu kernels take f32 x f32 -> f32 or bf16 x bf16 -> f32/bf16, got {} x {} -> {}", what,
           dtype_name(a), dtype_name(b), dtype_name(c));
}

// How cblas sees a 2-D view with a unit stride in one dim: row-major (no transpose) or column-major
// (transpose of the row-major matrix it is stored as), with that storage's leading dimension.
struct BlasOperand {
  CBLAS_TRANSPOSE trans;
  blasint ld;
};

BlasOperand blas_operand(const TensorView& m) {
  const int64_t rows = m.size(0), cols = m.size(1);
  // The stride of a dim of extent 1 is never used for addressing but cblas still checks it
  // (ld >= max(1, row length)), and views keep whatever stride their parent had there.
  if (m.stride(1) == 1 && (rows <= 1 || m.stride(0) >= cols))
    return {CblasNoTrans, blasint(std::max({m.stride(0), cols, int64_t(1)}))};
  RF_CHECK(m.stride(0) == 1 && (cols <= 1 || m.stride(1) >= rows),
           "gemm operand is neither row- nor column-major: {}", m.describe());
  return {CblasTrans, blasint(std::max({m.stride(1), rows, int64_t(1)}))};
}

// c_MN = alpha * a_MK b_KN + beta * c_MN in f32; with beta == 0 OpenBLAS zeroes c, never reads it.
void sgemm(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, float beta) {
  const int64_t M = c_MN.size(0), N = c_MN.size(1), K = a_MK.size(1);
  for (const TensorView* m : {&a_MK, &b_KN, &c_MN})
    RF_CHECK(m->size(0) < INT_MAX && m->size(1) < INT_MAX && m->stride(0) < INT_MAX && m->stride(1) < INT_MAX,
             "gemm: {} exceeds the 32-bit BLAS interface", m->describe());
  if (M == 0 || N == 0) return;
  const BlasOperand a = blas_operand(a_MK), b = blas_operand(b_KN), c = blas_operand(c_MN);
  cblas_sgemm(CblasRowMajor, a.trans, b.trans, blasint(M), blasint(N), blasint(K), alpha, a_MK.data<float>(), a.ld,
              b_KN.data<float>(), b.ld, beta, c_MN.data<float>(), c.ld);
}

// y_NO = b_O on every row. The OpenBLAS forward then accumulates x w^T onto it (beta = 1): this
// pass replaces the one in which OpenBLAS would zero y for beta = 0, so the bias add is free.
void broadcast_rows(TensorView b_O, TensorView y_NO) {
  const float* b = b_O.data<float>();
  float* y = y_NO.data<float>();
  const int64_t N = y_NO.size(0), O = y_NO.size(1), ld = y_NO.stride(0);
#pragma omp parallel for schedule(static) if (N * O > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) std::copy_n(b, O, y + n * ld);
}

// y_NO = x_NO (f32), for the OpenBLAS residual forward, which then accumulates onto y.
void copy_rows(TensorView x_NO, TensorView y_NO) {
  const float* x = x_NO.data<float>();
  float* y = y_NO.data<float>();
  const int64_t N = y_NO.size(0), O = y_NO.size(1), ldx = x_NO.stride(0), ldy = y_NO.stride(0);
#pragma omp parallel for schedule(static) if (N * O > kParallelGrain)
  for (int64_t n = 0; n < N; ++n) std::copy_n(x + n * ldx, O, y + n * ldy);
}

float as_f32(float x) { return x; }
float as_f32(bf16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

// db_O (= or +=) sum over N of dy_NO. Columns go in blocks (one per thread at a time) whose partial sums
// stay in a small f32 array across all rows: unit-stride row loads, a vectorised add, and db
// touched once per column.
template <class T>
void reduce_bias_grad(TensorView dy_NO, TensorView db_O, Accumulate mode) {
  constexpr int64_t kBlock = 256;
  const T* dy = dy_NO.data<T>();
  float* db = db_O.data<float>();
  const int64_t N = dy_NO.size(0), O = dy_NO.size(1), ld = dy_NO.stride(0);
  const int64_t num_blocks = (O + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (N * O > kParallelGrain)
  for (int64_t block = 0; block < num_blocks; ++block) {
    const int64_t o0 = block * kBlock, width = std::min(kBlock, O - o0);
    float sum[kBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* row = dy + n * ld + o0;
      for (int64_t j = 0; j < width; ++j) sum[j] += as_f32(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) db[o0 + j] = mode == Accumulate::add ? db[o0 + j] + sum[j] : sum[j];
  }
}

// c_MN = alpha * a_MK b_KN + the epilogue on `library`. OpenBLAS takes f32 only (0.3.21 has no bf16
// GEMM that takes our layouts; the registry never sends bf16 there) and gets the epilogue as beta = 1
// over c prefilled with the bias or the addend, which replaces the pass in which it would zero c.
template <GemmLibrary library>
void matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue) {
  if constexpr (library == GemmLibrary::onednn) {
    onednn_matmul(a_MK, b_KN, c_MN, alpha, epilogue);
  } else if constexpr (library == GemmLibrary::ordered) {
    ordered_matmul(a_MK, b_KN, c_MN, alpha, epilogue);
  } else {
    RF_CHECK(a_MK.dtype() == DType::f32 && c_MN.dtype() == DType::f32,
             "gemm on openblas: f32 only, got {} -> {}", dtype_name(a_MK.dtype()), dtype_name(c_MN.dtype()));
    const int terms = int(!epilogue.bias_N.empty()) + int(!epilogue.addend_MN.empty()) + int(epilogue.beta != 0.0f);
    RF_CHECK(terms <= 1, "gemm on openblas: at most one of bias, addend and beta, got {}", terms);
    if (!epilogue.bias_N.empty()) {
      broadcast_rows(epilogue.bias_N, c_MN);
      sgemm(a_MK, b_KN, c_MN, alpha, 1.0f);
    } else if (!epilogue.addend_MN.empty()) {
      copy_rows(epilogue.addend_MN, c_MN);
      sgemm(a_MK, b_KN, c_MN, alpha, 1.0f);
    } else {
      sgemm(a_MK, b_KN, c_MN, alpha, epilogue.beta);
    }
  }
}

}  // namespace

template <GemmLibrary library>
void gemm_with(const GemmParams& p, TensorView a, TensorView b, TensorView c) {
  const auto [a_MK, b_KN] = check_gemm_args(p, a, b, c);
  check_dtypes(a.dtype(), b.dtype(), c.dtype(), "gemm");
  matmul<library>(a_MK, b_KN, c, float(p.alpha), {.beta = float(p.beta)});
}

template <GemmLibrary library>
void linear_forward_with(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO) {
  check_linear_forward_args(x_NI, w_OI, b_O, y_NO);
  check_dtypes(x_NI.dtype(), w_OI.dtype(), y_NO.dtype(), "linear_forward");
  matmul<library>(x_NI, w_OI.transpose(0, 1), y_NO, 1.0f, {.bias_N = b_O});  // bias added in f32 before rounding
}

template <GemmLibrary library>
void linear_residual_forward_with(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO) {
  check_linear_residual_forward_args(x_NI, w_OI, resid_NO, y_NO);
  check_dtypes(x_NI.dtype(), w_OI.dtype(), y_NO.dtype(), "linear_residual_forward");
  matmul<library>(x_NI, w_OI.transpose(0, 1), y_NO, 1.0f, {.addend_MN = resid_NO});
}

template <GemmLibrary library>
void linear_dgrad_with(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode) {
  check_linear_dgrad_args(dy_NO, w_OI, dx_NI);
  check_dtypes(dy_NO.dtype(), w_OI.dtype(), dx_NI.dtype(), "linear_dgrad");
  matmul<library>(dy_NO, w_OI, dx_NI, 1.0f, {.beta = mode == Accumulate::add ? 1.0f : 0.0f});
}

template <GemmLibrary library>
void linear_wgrad_with(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode) {
  check_linear_wgrad_args(dy_NO, x_NI, dw_OI, db_O);
  check_dtypes(dy_NO.dtype(), x_NI.dtype(), dw_OI.dtype(), "linear_wgrad");
  matmul<library>(dy_NO.transpose(0, 1), x_NI, dw_OI, 1.0f, {.beta = mode == Accumulate::add ? 1.0f : 0.0f});
  if (db_O.empty()) return;
  if (dy_NO.dtype() == DType::bf16) {
    reduce_bias_grad<bf16>(dy_NO, db_O, mode);
  } else {
    reduce_bias_grad<float>(dy_NO, db_O, mode);
  }
}

// The grouped GEMM (moe.h): every expert's product cut into fixed tiles, all run in one parallel region,
// each tile one single-threaded product on the engine (grouped_tiles.h), or on the few-row kernels for an
// expert of at most kFewRows rows. The engines are never asked for M = 0 or K = 0 products: an empty group has
// no forward or dgrad tiles, and its weight gradient tiles are zeroed (overwrite) or absent (add), the value
// of an empty sum.

namespace {

// An expert of `rows` rows runs on the few-row kernels: not on the ordered GEMM, whose grouped results must stay
// one linear call per expert bit for bit, nor on the generic variant, which has no vector kernels.
template <GemmLibrary library>
bool on_few_row_kernels(int64_t rows) {
  return kHasFewRowKernels && library != GemmLibrary::ordered && rows <= kFewRows;
}

// first_row_E[e] = the first row of group e.
std::vector<int64_t> first_rows(std::span<const int64_t> group_sizes_E) {
  std::vector<int64_t> first(group_sizes_E.size(), 0);
  for (size_t e = 1; e < first.size(); ++e) first[e] = first[e - 1] + group_sizes_E[e - 1];
  return first;
}

}  // namespace

template <GemmLibrary library>
void grouped_gemm_forward_with(TensorView x_NI, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                               TensorView y_NO) {
  check_grouped_gemm_forward_args(x_NI, w_EOI, group_sizes_E, y_NO);
  check_dtypes(x_NI.dtype(), w_EOI.dtype(), y_NO.dtype(), "grouped_gemm");
  const std::vector<int64_t> first = first_rows(group_sizes_E), depth(group_sizes_E.size(), x_NI.size(1));
  run_group_tiles(group_tiles(group_sizes_E, y_NO.size(1), depth), [&](const GroupTile& t) {
    const int64_t row = first[size_t(t.expert)] + t.row0;
    const TensorView x = x_NI.slice(0, row, t.rows), w_OI = w_EOI.select(0, t.expert).slice(0, t.col0, t.cols);
    const TensorView y = y_NO.slice(0, row, t.rows).slice(1, t.col0, t.cols);
    if (on_few_row_kernels<library>(group_sizes_E[size_t(t.expert)])) return few_rows_forward(x, w_OI, y);
    matmul<library>(x, w_OI.transpose(0, 1), y, 1.0f, {});
  });
}

template <GemmLibrary library>
void grouped_gemm_dgrad_with(TensorView dy_NO, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                             TensorView dx_NI, Accumulate mode) {
  check_grouped_gemm_dgrad_args(dy_NO, w_EOI, group_sizes_E, dx_NI);
  check_dtypes(dy_NO.dtype(), w_EOI.dtype(), dx_NI.dtype(), "grouped_gemm_dgrad");
  const std::vector<int64_t> first = first_rows(group_sizes_E), depth(group_sizes_E.size(), dy_NO.size(1));
  const float beta = mode == Accumulate::add ? 1.0f : 0.0f;
  run_group_tiles(group_tiles(group_sizes_E, dx_NI.size(1), depth), [&](const GroupTile& t) {
    const int64_t row = first[size_t(t.expert)] + t.row0;
    const TensorView dy = dy_NO.slice(0, row, t.rows), w_OI = w_EOI.select(0, t.expert).slice(1, t.col0, t.cols);
    const TensorView dx = dx_NI.slice(0, row, t.rows).slice(1, t.col0, t.cols);
    if (on_few_row_kernels<library>(group_sizes_E[size_t(t.expert)])) return few_rows_dgrad(dy, w_OI, dx, mode);
    matmul<library>(dy, w_OI, dx, 1.0f, {.beta = beta});
  });
}

// Here an expert's c is dw_OI (M = O, N = I) and its depth the group's rows.
template <GemmLibrary library>
void grouped_gemm_wgrad_with(TensorView dy_NO, TensorView x_NI, std::span<const int64_t> group_sizes_E,
                             TensorView dw_EOI, Accumulate mode) {
  check_grouped_gemm_wgrad_args(dy_NO, x_NI, group_sizes_E, dw_EOI);
  check_dtypes(dy_NO.dtype(), x_NI.dtype(), dw_EOI.dtype(), "grouped_gemm_wgrad");
  const std::vector<int64_t> first = first_rows(group_sizes_E);
  std::vector<int64_t> rows_E(group_sizes_E.size());
  for (size_t e = 0; e < rows_E.size(); ++e)
    rows_E[e] = group_sizes_E[e] > 0 || mode == Accumulate::overwrite ? dw_EOI.size(1) : 0;
  const float beta = mode == Accumulate::add ? 1.0f : 0.0f;
  run_group_tiles(group_tiles(rows_E, dw_EOI.size(2), group_sizes_E), [&](const GroupTile& t) {
    const TensorView dw = dw_EOI.select(0, t.expert).slice(0, t.row0, t.rows).slice(1, t.col0, t.cols);
    const int64_t row = first[size_t(t.expert)], group = group_sizes_E[size_t(t.expert)];
    if (group == 0) return fill_zero(dw);
    const TensorView dy = dy_NO.slice(0, row, group).slice(1, t.row0, t.rows);
    const TensorView x = x_NI.slice(0, row, group).slice(1, t.col0, t.cols);
    if (on_few_row_kernels<library>(group)) return few_rows_wgrad(dy, x, dw, mode);
    matmul<library>(dy.transpose(0, 1), x, dw, 1.0f, {.beta = beta});
  });
}

template <GemmLibrary library>
const KernelTable& table_on() {
  static const KernelTable kTable = [] {
    KernelTable t = table();
    t.gemm = gemm_with<library>;
    t.linear_forward = linear_forward_with<library>;
    t.linear_residual_forward = linear_residual_forward_with<library>;
    t.linear_dgrad = linear_dgrad_with<library>;
    t.linear_wgrad = linear_wgrad_with<library>;
    t.grouped_gemm_forward = grouped_gemm_forward_with<library>;
    t.grouped_gemm_dgrad = grouped_gemm_dgrad_with<library>;
    t.grouped_gemm_wgrad = grouped_gemm_wgrad_with<library>;
    return t;
  }();
  return kTable;
}

const KernelTable& openblas_table() { return table_on<GemmLibrary::openblas>(); }
const KernelTable& ordered_table() { return table_on<GemmLibrary::ordered>(); }

void gemm(const GemmParams& p, TensorView a, TensorView b, TensorView c) {
  gemm_with<GemmLibrary::onednn>(p, a, b, c);
}
void linear_forward(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO) {
  linear_forward_with<GemmLibrary::onednn>(x_NI, w_OI, b_O, y_NO);
}
void linear_residual_forward(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO) {
  linear_residual_forward_with<GemmLibrary::onednn>(x_NI, w_OI, resid_NO, y_NO);
}
void linear_dgrad(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode) {
  linear_dgrad_with<GemmLibrary::onednn>(dy_NO, w_OI, dx_NI, mode);
}
void linear_wgrad(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode) {
  linear_wgrad_with<GemmLibrary::onednn>(dy_NO, x_NI, dw_OI, db_O, mode);
}
void grouped_gemm_forward(TensorView x_NI, TensorView w_EOI, std::span<const int64_t> group_sizes_E, TensorView y_NO) {
  grouped_gemm_forward_with<GemmLibrary::onednn>(x_NI, w_EOI, group_sizes_E, y_NO);
}
void grouped_gemm_dgrad(TensorView dy_NO, TensorView w_EOI, std::span<const int64_t> group_sizes_E, TensorView dx_NI,
                        Accumulate mode) {
  grouped_gemm_dgrad_with<GemmLibrary::onednn>(dy_NO, w_EOI, group_sizes_E, dx_NI, mode);
}
void grouped_gemm_wgrad(TensorView dy_NO, TensorView x_NI, std::span<const int64_t> group_sizes_E, TensorView dw_EOI,
                        Accumulate mode) {
  grouped_gemm_wgrad_with<GemmLibrary::onednn>(dy_NO, x_NI, group_sizes_E, dw_EOI, mode);
}

}  // namespace rf::kernels::RF_CPU_NS
