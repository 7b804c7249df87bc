// Fast RMSNorm for f32 and bf16 (maths and HF's rounding points in kernels/rmsnorm.h), computed
// in f32: rows are spread over threads, each row is two vectorised passes (sum of squares, then
// scale) in forward and in dx.
// dw sums over rows. To make it independent of the thread count, the rows are cut into a number
// of blocks that depends on N alone; each block sums its rows in order into its own partial row,
// and the partial rows are then added in block order.
// Legend: N rows, C normalised dim.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

constexpr int64_t kMaxDwBlocks = 64;
constexpr int64_t kMinRowsPerDwBlock = 8;
constexpr int64_t kDwReduceColumns = 64;

template <class T>
void forward_rows(double eps, TensorView x_NC, TensorView w_C, TensorView y_NC, TensorView rstd_N) {
  const int64_t N = x_NC.size(0), C = x_NC.size(1);
  const T* x = x_NC.data<T>();
  const T* w = w_C.data<T>();
  T* y = y_NC.data<T>();
  float* rstd_out = rstd_N.data<float>();
  const int64_t x_stride = x_NC.stride(0), y_stride = y_NC.stride(0), rstd_stride = rstd_N.stride(0);
  // HF adds eps to the f32 variance as an f32.
  const float eps_f32 = float(eps);
#pragma omp parallel for schedule(static) if (N * C >= kMinParallelElements)
  for (int64_t n = 0; n < N; ++n) {
    const T* x_row = x + n * x_stride;
    T* y_row = y + n * y_stride;
    float sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
    for (int64_t c = 0; c < C; ++c) {
      const float v = load(x_row[c]);
      sum_sq += v * v;
    }
    const float rstd = 1.0f / std::sqrt(sum_sq / float(C) + eps_f32);
    rstd_out[n * rstd_stride] = rstd;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store(y_row[c], load(w[c]) * round_as<T>(load(x_row[c]) * rstd));
  }
}

template <class T>
void backward_rows(TensorView dy_NC, TensorView x_NC, TensorView w_C, TensorView rstd_N, TensorView dx_NC,
                   TensorView dw_C, Accumulate mode) {
  const int64_t N = x_NC.size(0), C = x_NC.size(1);
  const T* dy = dy_NC.data<T>();
  const T* x = x_NC.data<T>();
  const T* w = w_C.data<T>();
  const float* rstd_in = rstd_N.data<float>();
  T* dx = dx_NC.data<T>();
  float* dw = dw_C.data<float>();
  const int64_t dy_stride = dy_NC.stride(0), x_stride = x_NC.stride(0), dx_stride = dx_NC.stride(0);
  const int64_t rstd_stride = rstd_N.stride(0);
  const bool add = mode == Accumulate::add;

  const int64_t num_blocks = std::min(kMaxDwBlocks, (N + kMinRowsPerDwBlock - 1) / kMinRowsPerDwBlock);
  // Per-call scratch, at most kMaxDwBlocks rows of C floats: the price of a dw that does not depend
  // on how many threads ran.
  std::vector<float> partial_dw(size_t(num_blocks * C), 0.0f);

#pragma omp parallel for schedule(static) if (N * C >= kMinParallelElements)
  for (int64_t b = 0; b < num_blocks; ++b) {
    float* block_dw = partial_dw.data() + b * C;
    for (int64_t n = N * b / num_blocks; n < N * (b + 1) / num_blocks; ++n) {
      const T* dy_row = dy + n * dy_stride;
      const T* x_row = x + n * x_stride;
      T* dx_row = dx + n * dx_stride;
      const float rstd = rstd_in[n * rstd_stride];
      float sum_g_xhat = 0;
#pragma omp simd reduction(+ : sum_g_xhat)
      for (int64_t c = 0; c < C; ++c) sum_g_xhat += load(dy_row[c]) * load(w[c]) * (load(x_row[c]) * rstd);
      const float mean_g_xhat = sum_g_xhat / float(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float g = load(dy_row[c]) * load(w[c]);
        const float xhat = load(x_row[c]) * rstd;
        const float d = rstd * (g - xhat * mean_g_xhat);
        store(dx_row[c], add ? load(dx_row[c]) + d : d);
        block_dw[c] += load(dy_row[c]) * xhat;
      }
    }
  }

  const int64_t num_column_chunks = (C + kDwReduceColumns - 1) / kDwReduceColumns;
#pragma omp parallel for schedule(static) if (num_blocks * C >= kMinParallelElements)
  for (int64_t chunk = 0; chunk < num_column_chunks; ++chunk) {
    const int64_t c0 = chunk * kDwReduceColumns, len = std::min(kDwReduceColumns, C - c0);
    float sum[kDwReduceColumns] = {};
    for (int64_t b = 0; b < num_blocks; ++b) {
      const float* block_dw = partial_dw.data() + b * C + c0;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) sum[j] += block_dw[j];
    }
    for (int64_t j = 0; j < len; ++j) dw[c0 + j] += sum[j];
  }
}

}  // namespace

void rmsnorm_forward(const RmsNormParams& p, TensorView x_NC, TensorView w_C, TensorView y_NC,
                     RmsNormSaved& saved) {
  check_rmsnorm_forward(x_NC, w_C, y_NC, saved.rstd_N);
  switch (x_NC.dtype()) {
    case DType::f32: return forward_rows<float>(p.eps, x_NC, w_C, y_NC, saved.rstd_N);
    case DType::bf16: return forward_rows<bf16>(p.eps, x_NC, w_C, y_NC, saved.rstd_N);
    default: RF_CHECK(false, "cpu rmsnorm_forward: {} runs on ref", dtype_name(x_NC.dtype()));
  }
}

void rmsnorm_backward(const RmsNormParams&, TensorView dy_NC, TensorView x_NC, TensorView w_C,
                      const RmsNormSaved& saved, TensorView dx_NC, TensorView dw_C, Accumulate mode) {
  check_rmsnorm_backward(dy_NC, x_NC, w_C, saved.rstd_N, dx_NC, dw_C);
  switch (x_NC.dtype()) {
    case DType::f32: return backward_rows<float>(dy_NC, x_NC, w_C, saved.rstd_N, dx_NC, dw_C, mode);
    case DType::bf16: return backward_rows<bf16>(dy_NC, x_NC, w_C, saved.rstd_N, dx_NC, dw_C, mode);
    default: RF_CHECK(false, "cpu rmsnorm_backward: {} runs on ref", dtype_name(x_NC.dtype()));
  }
}

}  // namespace rf::kernels::RF_CPU_NS
