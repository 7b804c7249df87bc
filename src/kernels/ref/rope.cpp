// Reference RoPE (maths in kernels/rope.h): every element rotated in f64, the frequency, angle,
// cosine and sine recomputed per element from the formula. Backward is the same rotation with the
// sine negated.
// Legend: N tokens, H heads, D head dim.
#include <cmath>

#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::ref {
namespace {

// Rotates the first rotary_dim dims of every head by +angle (sign 1) or -angle (sign -1).
void rotate(const RopeParams& p, TensorView pos_N, TensorView x_NHD, double sign) {
  const int64_t rotary_dim = check_rope(p, pos_N, x_NHD);
  const int64_t half = rotary_dim / 2;
  for (int64_t n = 0; n < x_NHD.size(0); ++n) {
    const double pos = load_f64(pos_N, n * pos_N.stride(0));
    for (int64_t h = 0; h < x_NHD.size(1); ++h) {
      const int64_t head = n * x_NHD.stride(0) + h * x_NHD.stride(1);
      for (int64_t i = 0; i < half; ++i) {
        const double inv_freq = rope_inv_freq(p, i, rotary_dim);
        const double angle = pos * inv_freq;
        const double cos_a = std::cos(angle), sin_a = sign * std::sin(angle);
        const double x1 = load_f64(x_NHD, head + i), x2 = load_f64(x_NHD, head + i + half);
        store_f64(x_NHD, head + i, x1 * cos_a - x2 * sin_a);
        store_f64(x_NHD, head + i + half, x2 * cos_a + x1 * sin_a);
      }
    }
  }
}

}  // namespace

void rope_forward(const RopeParams& p, TensorView pos_N, TensorView x_NHD) { rotate(p, pos_N, x_NHD, 1.0); }

void rope_backward(const RopeParams& p, TensorView pos_N, TensorView dx_NHD) { rotate(p, pos_N, dx_NHD, -1.0); }

}  // namespace rf::kernels::ref
