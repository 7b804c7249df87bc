#include "optim/adamw_optimizer.h"

#include <cmath>

namespace rf::optim {
namespace {

bool decays(const model::ParamEntry& e) { return e.shape.rank() >= 2 && !e.name.ends_with(".bias"); }

}  // namespace

double AdamWOptimizer::tp_owned_sum_squares(const model::GradBuffer& grads) const {
  // Padding between tensors (and vocab padding rows) holds zeros, so at TP 1 the flat buffer's sum
  // of squares is the parameters'.
  if (parallel_.tp().size() == 1) return kernels_.sum_squares(grads.flat());
  // TP-split tensors count on every rank (each holds a different part); TP-replicated ones hold the
  // same values on every rank and count once, on TP rank 0 (Megatron's param_is_not_tensor_parallel_duplicate).
  double sum = 0;
  for (const model::ParamEntry& e : grads.layout().entries())
    if (e.split != model::TpSplit::replicated || parallel_.tp().rank() == 0)
      sum += kernels_.sum_squares(grads.flat().slice(0, e.offset, e.shape.numel()));
  return sum;
}

AdamWOptimizer::AdamWOptimizer(const OptimConfig& config, const model::ParamStore& master,
                               const model::ParamStore* compute_copy, const kernels::KernelRegistry& kernels,
                               dist::ParallelContext& parallel, MemoryTracker* tracker)
    : config_(config),
      master_(master),
      compute_copy_(compute_copy),
      kernels_(kernels),
      parallel_(parallel),
      exp_avg_({master.layout().total_numel()}, master.dtype(), {tracker, MemoryTier::device, MemoryCategory::optimizer}),
      exp_avg_sq_({master.layout().total_numel()}, master.dtype(),
                  {tracker, MemoryTier::device, MemoryCategory::optimizer}) {
  config_.validate();
  RF_CHECK(master.dtype() == DType::f32 || master.dtype() == DType::f64, "master weights in {}: expected f32 (f64 in tests)",
           dtype_name(master.dtype()));
}

double AdamWOptimizer::step(const model::GradBuffer& grads, double lr) {
  RF_CHECK(grads.dtype() == master_.dtype(), "gradients in {} for {} master weights", dtype_name(grads.dtype()),
           dtype_name(master_.dtype()));
  double sum_squares = tp_owned_sum_squares(grads);
  sum_squares = parallel_.tp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  sum_squares = parallel_.pp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  const double grad_norm = std::sqrt(sum_squares);
  if (!std::isfinite(grad_norm)) return grad_norm;
  if (config_.clip_grad > 0) {
    const double coefficient = kernels::clip_coefficient(grad_norm, config_.clip_grad);
    if (coefficient < 1.0) kernels_.scale(grads.flat(), coefficient);
  }
  ++num_steps_;
  for (const model::ParamEntry& e : master_.layout().entries()) {
    const int64_t n = e.shape.numel();
    const kernels::AdamWParams p{lr, config_.betas[0], config_.betas[1], config_.eps,
                                 decays(e) ? config_.weight_decay : 0.0, num_steps_};
    kernels_.adamw_step(p, master_.flat().slice(0, e.offset, n), grads.flat().slice(0, e.offset, n),
                        exp_avg_.view().slice(0, e.offset, n), exp_avg_sq_.view().slice(0, e.offset, n),
                        compute_copy_ ? compute_copy_->flat().slice(0, e.offset, n) : TensorView());
  }
  return grad_norm;
}

}  // namespace rf::optim
