// AdamWOptimizer: Megatron's "adam" (decoupled weight decay) over a ParamStore of f32 master weights.
// One step: global grad norm (f64 sum of squares, reduced over the model-parallel groups), clipping
// to clip_grad (the pre-clip norm is what verl logs as grad_norm), then AdamW per tensor. As in
// Megatron, weight decay skips biases and 1-D parameters (norm gains). With bf16 compute the
// updated master weights are also written into the bf16 copy the model reads.
// Not here yet: the distributed optimizer (ZeRO-1 over DP) and offload, which keep this interface.
#pragma once

#include "dist/parallel_context.h"
#include "kernels/kernel_registry.h"
#include "model/param_store.h"
#include "optim/optim_config.h"

namespace rf::optim {

class AdamWOptimizer {
 public:
  // `compute_copy` may be null (f32 compute: the model reads `master` itself).
  AdamWOptimizer(const OptimConfig& config, const model::ParamStore& master, const model::ParamStore* compute_copy,
                 const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                 MemoryTracker* tracker = nullptr);

  // Clips `grads` in place and updates the weights at learning rate `lr`; returns the pre-clip norm.
  // A non-finite norm skips the update (and reports the norm), as Megatron does.
  double step(const model::GradBuffer& grads, double lr);

  int64_t num_steps() const { return num_steps_; }
  void set_num_steps(int64_t num_steps) { num_steps_ = num_steps; }
  TensorView exp_avg() const { return exp_avg_; }
  TensorView exp_avg_sq() const { return exp_avg_sq_; }

 private:
  // This rank's share of the squared gradient norm over its TP group (summed over TP by the caller).
  double tp_owned_sum_squares(const model::GradBuffer& grads) const;

  OptimConfig config_;
  const model::ParamStore& master_;
  const model::ParamStore* compute_copy_;
  const kernels::KernelRegistry& kernels_;
  dist::ParallelContext& parallel_;
  Tensor exp_avg_, exp_avg_sq_;  // laid out like the ParamStore
  int64_t num_steps_ = 0;
};

}  // namespace rf::optim
