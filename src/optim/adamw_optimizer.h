// AdamWOptimizer: Megatron's "adam" (decoupled weight decay) over a ParamStore of f32 master weights.
// One step: global grad norm (f64 sum of squares, reduced over the model-parallel groups), clipping
// to clip_grad (the pre-clip norm is what verl logs as grad_norm), then AdamW per tensor. As in
// Megatron, weight decay skips biases and 1-D parameters (norm gains). With bf16 compute the
// updated master weights are also written into the bf16 copy the model reads.
// It updates the parameters of this rank's shard (BucketPlan): everything without sharding; with the
// distributed optimizer (ZeRO-1 over DP) only the fragments of its shard, whose Adam moments are all it
// allocates. Gathering the updated weights from the other DP ranks is the caller's (shard_gatherer.h).
// Offload is the engine's (TrainEngine::offload): it moves the moments through state_tensors(), which
// keep their addresses.
#pragma once

#include <array>

#include "dist/parallel_context.h"
#include "kernels/kernel_registry.h"
#include "model/param_store.h"
#include "optim/bucket_plan.h"
#include "optim/optim_config.h"

namespace rf::optim {

class AdamWOptimizer {
 public:
  // `compute_copy` may be null (f32 compute: the model reads `master` itself). `shards` (kept by
  // reference) says which parameters this rank updates; sharded over the context's DP group.
  AdamWOptimizer(const OptimConfig& config, const model::ParamStore& master, const model::ParamStore* compute_copy,
                 const BucketPlan& shards, const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                 MemoryTracker* tracker = nullptr);

  // The pre-clip norm of the whole model's gradient: this rank's shard, reduced over TP and PP (and DP
  // with sharding), so every rank of the role gets the same value. Collective.
  double grad_norm(const model::GradBuffer& grads) const;
  // Clips this rank's shard of `grads` in place to clip_grad, given their norm (grad_norm's), and updates
  // its weights at learning rate `lr`. Whether a non-finite norm may reach here is the caller's decision
  // (TrainEngine: check_for_nan_in_loss_and_grad). With sharding only the shard's part of `grads` is read
  // (the DP-reduced values after a reduce-scatter) and only the shard's weights change.
  void step(const model::GradBuffer& grads, double grad_norm, double lr);

  int64_t num_steps() const { return num_steps_; }
  void set_num_steps(int64_t num_steps) { num_steps_ = num_steps; }
  TensorView exp_avg() const { return exp_avg_; }
  TensorView exp_avg_sq() const { return exp_avg_sq_; }
  // Every tensor of this rank's state (the moments of its shard), for offload.
  std::array<Tensor*, 2> state_tensors() { return {&exp_avg_, &exp_avg_sq_}; }

 private:
  // The squared norm of this rank's fragments, counting TP-replicated parameters on TP rank 0 only.
  double owned_sum_squares(const model::GradBuffer& grads) const;

  OptimConfig config_;
  const model::ParamStore& master_;
  const model::ParamStore* compute_copy_;
  const BucketPlan& shards_;
  const kernels::KernelRegistry& kernels_;
  dist::ParallelContext& parallel_;
  Tensor exp_avg_, exp_avg_sq_;  // laid out like the shard (like the ParamStore without sharding)
  int64_t num_steps_ = 0;
};

}  // namespace rf::optim
