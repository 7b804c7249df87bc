// Reference AdamW step: torch.optim.AdamW's single-tensor loop (torch 1.13, non-foreach,
// non-amsgrad) replayed op by op in the dtype of the parameters (f32 or f64), so that the f32
// result is the one torch's sequence of rounded tensor ops gives, not an f64 approximation of it.
// The fast kernel (cpu/adamw.cpp) performs exactly the same operations and matches bitwise.
#include <cmath>
#include <utility>

#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"

namespace rf::kernels::ref {
namespace {

template <class T>
void step_elements(const AdamWParams& params, T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t count,
                   TensorView param_copy) {
  // Python-float scalars, formed in f64 and rounded to T when applied to a T tensor, as torch does.
  const double bias_correction1 = 1 - std::pow(params.beta1, double(params.step));
  const double bias_correction2 = 1 - std::pow(params.beta2, double(params.step));
  const double step_size = params.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  const T decay = T(1 - params.lr * params.weight_decay);
  const T beta1 = T(params.beta1), one_minus_beta1 = T(1 - params.beta1);
  const T beta2 = T(params.beta2), one_minus_beta2 = T(1 - params.beta2);
  const T denom_scale = T(bias_correction2_sqrt), eps = T(params.eps), neg_step_size = T(-step_size);

  for (int64_t i = 0; i < count; ++i) {
    // param.mul_(1 - lr * weight_decay)
    param[i] = param[i] * decay;
    // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1): torch's add-with-alpha is an FMA
    // (vec::fmadd in its vectorised CPU kernel); writing std::fma keeps every variant identical
    // whether or not the compiler may contract.
    exp_avg[i] = std::fma(grad[i], one_minus_beta1, exp_avg[i] * beta1);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): self + (value * g) * g, fused
    // too (torch's source leaves this to the compiler, which contracts it on FMA builds).
    exp_avg_sq[i] = std::fma(one_minus_beta2 * grad[i], grad[i], exp_avg_sq[i] * beta2);
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    const T denom = std::sqrt(exp_avg_sq[i]) / denom_scale + eps;
    // param.addcdiv_(exp_avg, denom, value=-step_size): self + (value * t1) / t2
    param[i] = param[i] + neg_step_size * exp_avg[i] / denom;
    if (!param_copy.empty()) store_f64(param_copy, i, double(param[i]));
  }
}

}  // namespace

void adamw_step(const AdamWParams& params, TensorView param, TensorView grad, TensorView exp_avg,
                TensorView exp_avg_sq, TensorView param_copy) {
  const DType dtype = param.dtype();
  RF_CHECK(dtype == DType::f32 || dtype == DType::f64,
           "adamw: master weights must be f32 (or f64 in tests), got {}", dtype_name(dtype));
  RF_CHECK(params.step >= 1, "adamw: step is 1-based, got {}", params.step);
  const int64_t count = param.numel();
  for (const auto& [view, what] : {std::pair{param, "param"}, std::pair{grad, "grad"},
                                   std::pair{exp_avg, "exp_avg"}, std::pair{exp_avg_sq, "exp_avg_sq"}}) {
    check_dtype(view, dtype, what);
    RF_CHECK(view.is_contiguous() && view.numel() == count, "adamw: {} must be contiguous with {} elements, got {}",
             what, count, view.describe());
  }
  if (!param_copy.empty()) {
    RF_CHECK(is_floating(param_copy.dtype()) && param_copy.is_contiguous() && param_copy.numel() == count,
             "adamw: param_copy must be a contiguous floating tensor of {} elements, got {}", count,
             param_copy.describe());
  }
  if (dtype == DType::f32)
    step_elements(params, param.data<float>(), grad.data<float>(), exp_avg.data<float>(), exp_avg_sq.data<float>(),
                  count, param_copy);
  else
    step_elements(params, param.data<double>(), grad.data<double>(), exp_avg.data<double>(),
                  exp_avg_sq.data<double>(), count, param_copy);
}

}  // namespace rf::kernels::ref
