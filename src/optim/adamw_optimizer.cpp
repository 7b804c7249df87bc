#include "optim/adamw_optimizer.h"

#include <cmath>

namespace rf::optim {
namespace {

bool decays(const model::ParamEntry& e) { return e.shape.rank() >= 2 && !e.name.ends_with(".bias"); }

}  // namespace

double AdamWOptimizer::owned_sum_squares(const model::GradBuffer& grads) const {
  // TP-split tensors count on every rank (each holds a different part); TP-replicated ones hold the
  // same values on every rank and count once, on TP rank 0 (Megatron's param_is_not_tensor_parallel_duplicate).
  // DP shards are disjoint, so with sharding every element counts on exactly one DP rank. A pipeline stage's
  // copy of the tied embedding counts on the first stage only (Megatron's shared-embedding rule).
  const bool tp_rank0 = parallel_.tp().rank() == 0;
  const std::vector<model::ParamEntry>& entries = grads.layout().entries();
  double sum = 0;
  for (const ShardFragment& f : shards_.fragments())
    if (!entries[f.entry].pipeline_copy && (entries[f.entry].split != model::TpSplit::replicated || tp_rank0))
      sum += kernels_.sum_squares(grads.flat().slice(0, f.flat_offset, f.numel));
  return sum;
}

AdamWOptimizer::AdamWOptimizer(const OptimConfig& config, const model::ParamStore& master,
                               const model::ParamStore* compute_copy, const BucketPlan& shards,
                               const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                               MemoryTracker* tracker)
    : config_(config),
      master_(master),
      compute_copy_(compute_copy),
      shards_(shards),
      kernels_(kernels),
      parallel_(parallel),
      exp_avg_({shards.shard_numel()}, master.dtype(), {tracker, MemoryTier::device, MemoryCategory::optimizer}),
      exp_avg_sq_({shards.shard_numel()}, master.dtype(), {tracker, MemoryTier::device, MemoryCategory::optimizer}) {
  config_.validate();
  RF_CHECK(master.dtype() == DType::f32 || master.dtype() == DType::f64, "master weights in {}: expected f32 (f64 in tests)",
           dtype_name(master.dtype()));
  RF_CHECK(!shards.sharded() || shards.num_shards() == parallel.dp().size(),
           "the optimizer's parameters are sharded {} ways over {} DP ranks", shards.num_shards(),
           parallel.dp().size());
}

double AdamWOptimizer::grad_norm(const model::GradBuffer& grads) const {
  RF_CHECK(grads.dtype() == master_.dtype(), "gradients in {} for {} master weights", dtype_name(grads.dtype()),
           dtype_name(master_.dtype()));
  // Without sharding every DP rank holds the same reduced gradient, so the sum is complete over TP and
  // PP; with it each DP rank holds a disjoint part (megatron.md §4.6).
  double sum_squares = owned_sum_squares(grads);
  sum_squares = parallel_.tp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  sum_squares = parallel_.pp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  if (shards_.sharded()) sum_squares = parallel_.dp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  return std::sqrt(sum_squares);
}

void AdamWOptimizer::step(const model::GradBuffer& grads, double grad_norm, double lr) {
  const double coefficient = config_.clip_grad > 0 ? kernels::clip_coefficient(grad_norm, config_.clip_grad) : 1.0;
  ++num_steps_;
  const std::vector<model::ParamEntry>& entries = master_.layout().entries();
  for (const ShardFragment& f : shards_.fragments()) {
    const model::ParamEntry& e = entries[f.entry];
    const TensorView grad = grads.flat().slice(0, f.flat_offset, f.numel);
    if (coefficient < 1.0) kernels_.scale(grad, coefficient);
    const kernels::AdamWParams p{lr, config_.betas[0], config_.betas[1], config_.eps,
                                 decays(e) ? config_.weight_decay : 0.0, num_steps_};
    kernels_.adamw_step(p, master_.flat().slice(0, f.flat_offset, f.numel), grad,
                        exp_avg_.view().slice(0, f.shard_offset, f.numel),
                        exp_avg_sq_.view().slice(0, f.shard_offset, f.numel),
                        compute_copy_ ? compute_copy_->flat().slice(0, f.flat_offset, f.numel) : TensorView());
  }
}

}  // namespace rf::optim
