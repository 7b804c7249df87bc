// Reference pieces of gradient-norm clipping: the sum of squares in f64, element by element in
// row-major order, and the in-place scale.
#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

void check_floating(TensorView x, const char* op) {
  RF_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16 || x.dtype() == DType::f64,
           "{}: expected f32, bf16 or f64, got {}", op, dtype_name(x.dtype()));
}

}  // namespace

double sum_squares(TensorView x) {
  check_floating(x, "sum_squares");
  double sum = 0;
  for_each_offset(x.shape(), x.strides(), x.strides(), [&](int64_t offset, int64_t) {
    const double value = load_f64(x, offset);
    sum += value * value;
  });
  return sum;
}

// The factor is applied in the tensor's compute dtype, as torch's grad.mul_(clip_coef) does with
// its f32 coefficient: f32 (and bf16, through f32) multiply by float(factor), f64 by factor.
void scale(TensorView x, double factor) {
  check_floating(x, "scale");
  const bool f64 = x.dtype() == DType::f64;
  for_each_offset(x.shape(), x.strides(), x.strides(), [&](int64_t offset, int64_t) {
    const double value = load_f64(x, offset);
    store_f64(x, offset, f64 ? value * factor : double(float(value) * float(factor)));
  });
}

}  // namespace rf::kernels::ref
