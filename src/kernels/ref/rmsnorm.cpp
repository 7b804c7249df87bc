// Reference RMSNorm (maths in kernels/rmsnorm.h): one row at a time, every sum in f64, read and
// written through load_f64/store_f64 so any float dtype works. The one deliberate rounding inside
// is HF's: for bf16 the normalised x is rounded to bf16 before the gain multiplies it.
// Legend: N rows, C normalised dim.
#include <cmath>

#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::ref {

void rmsnorm_forward(const RmsNormParams& p, TensorView x_NC, TensorView w_C, TensorView y_NC,
                     RmsNormSaved& saved) {
  check_rmsnorm_forward(x_NC, w_C, y_NC, saved.rstd_N);
  const int64_t N = x_NC.size(0), C = x_NC.size(1);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t x_row = n * x_NC.stride(0), y_row = n * y_NC.stride(0);
    double sum_sq = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double v = load_f64(x_NC, x_row + c);
      sum_sq += v * v;
    }
    const double rstd = 1.0 / std::sqrt(sum_sq / double(C) + p.eps);
    store_f64(saved.rstd_N, n * saved.rstd_N.stride(0), rstd);
    for (int64_t c = 0; c < C; ++c) {
      double xhat = load_f64(x_NC, x_row + c) * rstd;
      if (x_NC.dtype() == DType::bf16) xhat = to_f32(to_bf16(float(xhat)));
      store_f64(y_NC, y_row + c, load_f64(w_C, c) * xhat);
    }
  }
}

void rmsnorm_backward(const RmsNormParams&, TensorView dy_NC, TensorView x_NC, TensorView w_C,
                      const RmsNormSaved& saved, TensorView dx_NC, TensorView dw_C, Accumulate mode) {
  check_rmsnorm_backward(dy_NC, x_NC, w_C, saved.rstd_N, dx_NC, dw_C);
  const int64_t N = x_NC.size(0), C = x_NC.size(1);
  for (int64_t c = 0; c < C; ++c) {
    double dw = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double rstd = load_f64(saved.rstd_N, n * saved.rstd_N.stride(0));
      dw += load_f64(dy_NC, n * dy_NC.stride(0) + c) * load_f64(x_NC, n * x_NC.stride(0) + c) * rstd;
    }
    store_f64(dw_C, c, load_f64(dw_C, c) + dw);
  }
  for (int64_t n = 0; n < N; ++n) {
    const int64_t x_row = n * x_NC.stride(0), dy_row = n * dy_NC.stride(0), dx_row = n * dx_NC.stride(0);
    const double rstd = load_f64(saved.rstd_N, n * saved.rstd_N.stride(0));
    double sum_g_xhat = 0;
    for (int64_t c = 0; c < C; ++c)
      sum_g_xhat += load_f64(dy_NC, dy_row + c) * load_f64(w_C, c) * load_f64(x_NC, x_row + c) * rstd;
    const double mean_g_xhat = sum_g_xhat / double(C);
    for (int64_t c = 0; c < C; ++c) {
      const double g = load_f64(dy_NC, dy_row + c) * load_f64(w_C, c);
      const double xhat = load_f64(x_NC, x_row + c) * rstd;
      double dx = rstd * (g - xhat * mean_g_xhat);
      if (mode == Accumulate::add) dx += load_f64(dx_NC, dx_row + c);
      store_f64(dx_NC, dx_row + c, dx);
    }
  }
}

}  // namespace rf::kernels::ref
