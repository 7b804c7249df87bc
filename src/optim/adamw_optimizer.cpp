#include "optim/adamw_optimizer.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <span>

namespace rf::optim {
namespace {

bool decays(const model::ParamEntry& e) { return e.shape.rank() >= 2 && !e.name.ends_with(".bias"); }

// The fragments cut at multiples of `slice_numel` of the shard, per slice (a slice may hold none: the padding
// of a sharded tail bucket).
std::vector<std::vector<ShardFragment>> slice_fragments(const BucketPlan& shards, int64_t slice_numel) {
  const int64_t num_slices = (shards.shard_numel() + slice_numel - 1) / slice_numel;
  std::vector<std::vector<ShardFragment>> slices(static_cast<size_t>(num_slices));
  for (const ShardFragment& f : shards.fragments())
    for (int64_t begin = f.shard_offset; begin < f.shard_offset + f.numel;) {
      const int64_t slice = begin / slice_numel;
      const int64_t end = std::min(f.shard_offset + f.numel, (slice + 1) * slice_numel);
      slices[size_t(slice)].push_back(
          {.entry = f.entry, .flat_offset = f.flat_offset + (begin - f.shard_offset), .shard_offset = begin,
           .numel = end - begin});
      begin = end;
    }
  return slices;
}

// A device-tier staging buffer of `numel` f32 (none when `needed` is false), non-resident until a step.
Tensor make_stage_buffer(bool needed, int64_t numel, MemoryTracker* tracker, MemoryCategory category) {
  if (!needed) return Tensor();
  Tensor t({numel}, DType::f32, {tracker, MemoryTier::device, category});
  t.set_resident(false);
  return t;
}

void set_stage_resident(std::array<Tensor*, 3> buffers, bool resident) {
  for (Tensor* t : buffers)
    if (!t->empty()) t->set_resident(resident);
}

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
                               MemoryTracker* tracker, StatePlacement placement)
    : config_(config),
      master_(master),
      compute_copy_(compute_copy),
      shards_(shards),
      kernels_(kernels),
      parallel_(parallel),
      placement_(placement),
      exp_avg_({shards.shard_numel()}, master.dtype(),
               {tracker, placement.moments_on_host ? MemoryTier::host : MemoryTier::device, MemoryCategory::optimizer}),
      exp_avg_sq_({shards.shard_numel()}, master.dtype(),
                  {tracker, placement.moments_on_host ? MemoryTier::host : MemoryTier::device,
                   MemoryCategory::optimizer}) {
  config_.validate();
  if (placement_.staged()) {
    RF_CHECK(placement_.slice_numel >= 1, "optimizer state staged in slices of {} elements", placement_.slice_numel);
    RF_CHECK(master.dtype() == DType::f32, "staged optimizer state: master weights in {}, expected f32",
             dtype_name(master.dtype()));
    RF_CHECK(placement_.masters == MasterHome::device || compute_copy,
             "the master weights are the weights the model reads (f32 compute): they stay on the device tier, whole");
    RF_CHECK((placement_.masters == MasterHome::split) == (placement_.split != nullptr),
             "split master weights need their remainders, and only they");
    const int64_t stage_numel = std::min(placement_.slice_numel, std::max<int64_t>(shards.shard_numel(), 1));
    slices_ = slice_fragments(shards, placement_.slice_numel);
    // One slice has nothing to overlap with: one stage.
    for (Stage& stage : std::span(stages_).first(slices_.size() > 1 ? 2 : 1)) {
      stage.exp_avg = make_stage_buffer(placement_.moments_on_host, stage_numel, tracker, MemoryCategory::optimizer);
      stage.exp_avg_sq =
          make_stage_buffer(placement_.moments_on_host, stage_numel, tracker, MemoryCategory::optimizer);
      stage.master = make_stage_buffer(placement_.masters != MasterHome::device, stage_numel, tracker,
                                       MemoryCategory::params);
    }
  }
}

double AdamWOptimizer::grad_norm(const model::GradBuffer& grads) const {
  RF_CHECK(grads.dtype() == master_.dtype(), "gradients in {} for {} master weights", dtype_name(grads.dtype()),
           dtype_name(master_.dtype()));
  // Without sharding every DP rank holds the same reduced gradient, so the sum is complete over TP and
  // PP; with it each DP rank holds a disjoint part (megatron.md §4.6).
  double sum_squares = owned_sum_squares(grads);
  sum_squares = parallel_.tp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  sum_squares = parallel_.pp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  if (shards_.sharded()) sum_squares = parallel_.dp_cp().all_reduce_scalar(sum_squares, dist::ReduceOp::sum);
  return std::sqrt(sum_squares);
}

void AdamWOptimizer::step(const model::GradBuffer& grads, double grad_norm, double lr) {
  const double coefficient = config_.clip_grad > 0 ? kernels::clip_coefficient(grad_norm, config_.clip_grad) : 1.0;
  ++num_steps_;
  if (placement_.staged()) {
    staged_step(grads, coefficient, lr);
    return;
  }
  for (const ShardFragment& f : shards_.fragments())
    update(f,
           {master_.flat().slice(0, f.flat_offset, f.numel), exp_avg_.view().slice(0, f.shard_offset, f.numel),
            exp_avg_sq_.view().slice(0, f.shard_offset, f.numel)},
           grads, coefficient, lr);
}

void AdamWOptimizer::update(const ShardFragment& f, const FragmentViews& views, const model::GradBuffer& grads,
                            double coefficient, double lr) {
  const model::ParamEntry& e = master_.layout().entries()[f.entry];
  const TensorView grad = grads.flat().slice(0, f.flat_offset, f.numel);
  if (coefficient < 1.0) kernels_.scale(grad, coefficient);
  const kernels::AdamWParams p{lr, config_.betas[0], config_.betas[1], config_.eps,
                               decays(e) ? config_.weight_decay : 0.0, num_steps_};
  // Split masters write their bf16 weights when they are split back.
  const bool writes_copy = compute_copy_ && placement_.masters != MasterHome::split;
  kernels_.adamw_step(p, views.master, grad, views.exp_avg, views.exp_avg_sq,
                      writes_copy ? compute_copy_->flat().slice(0, f.flat_offset, f.numel) : TensorView());
}

void AdamWOptimizer::staged_step(const model::GradBuffer& grads, double coefficient, double lr) {
  if (slices_.empty()) return;  // an empty shard
  for (Stage& stage : stages_) set_stage_resident({&stage.exp_avg, &stage.exp_avg_sq, &stage.master}, true);
  // Slice k + 1 comes in on a worker thread while slice k is updated (the kernels' OpenMP threads) and
  // written back; the two use different stages and disjoint parts of the homes.
  std::future<void> next = std::async(std::launch::async, [this] { stage_in(0, stages_[0]); });
  for (size_t k = 0; k < slices_.size(); ++k) {
    next.get();
    if (k + 1 < slices_.size())
      next = std::async(std::launch::async, [this, k] { stage_in(k + 1, stages_[(k + 1) % 2]); });
    const Stage& stage = stages_[k % 2];
    for (const ShardFragment& f : slices_[k]) update(f, views_of(f, stage, slice_start(k)), grads, coefficient, lr);
    stage_out(k, stage);
  }
  for (Stage& stage : stages_) set_stage_resident({&stage.exp_avg, &stage.exp_avg_sq, &stage.master}, false);
}

AdamWOptimizer::FragmentViews AdamWOptimizer::views_of(const ShardFragment& f, const Stage& stage,
                                                       int64_t slice_start) const {
  const int64_t staged = f.shard_offset - slice_start;
  const bool moments = placement_.moments_on_host;
  return {.master = placement_.masters != MasterHome::device ? stage.master.view().slice(0, staged, f.numel)
                                                             : master_.flat().slice(0, f.flat_offset, f.numel),
          .exp_avg = (moments ? stage.exp_avg.view() : exp_avg_.view())
                         .slice(0, moments ? staged : f.shard_offset, f.numel),
          .exp_avg_sq = (moments ? stage.exp_avg_sq.view() : exp_avg_sq_.view())
                            .slice(0, moments ? staged : f.shard_offset, f.numel)};
}

int64_t AdamWOptimizer::slice_numel(size_t slice) const {
  return std::min(placement_.slice_numel, shards_.shard_numel() - slice_start(slice));
}

void AdamWOptimizer::stage_in(size_t slice, Stage& stage) const {
  const int64_t start = slice_start(slice), numel = slice_numel(slice);
  if (placement_.moments_on_host) {
    copy_convert(exp_avg_.view().slice(0, start, numel), stage.exp_avg.view().slice(0, 0, numel));
    copy_convert(exp_avg_sq_.view().slice(0, start, numel), stage.exp_avg_sq.view().slice(0, 0, numel));
  }
  if (placement_.masters == MasterHome::device) return;
  for (const ShardFragment& f : slices_[slice]) {
    const TensorView staged = stage.master.view().slice(0, f.shard_offset - start, f.numel);
    if (placement_.masters == MasterHome::host) copy_convert(master_.flat().slice(0, f.flat_offset, f.numel), staged);
    if (placement_.masters == MasterHome::split)
      placement_.split->join(compute_copy_->flat().slice(0, f.flat_offset, f.numel), f.flat_offset, staged);
  }
}

void AdamWOptimizer::stage_out(size_t slice, const Stage& stage) const {
  const int64_t start = slice_start(slice), numel = slice_numel(slice);
  if (placement_.moments_on_host) {
    copy_convert(stage.exp_avg.view().slice(0, 0, numel), exp_avg_.view().slice(0, start, numel));
    copy_convert(stage.exp_avg_sq.view().slice(0, 0, numel), exp_avg_sq_.view().slice(0, start, numel));
  }
  if (placement_.masters == MasterHome::device) return;
  for (const ShardFragment& f : slices_[slice]) {
    const TensorView staged = stage.master.view().slice(0, f.shard_offset - start, f.numel);
    if (placement_.masters == MasterHome::host) copy_convert(staged, master_.flat().slice(0, f.flat_offset, f.numel));
    if (placement_.masters == MasterHome::split)
      placement_.split->split(staged, compute_copy_->flat().slice(0, f.flat_offset, f.numel), f.flat_offset);
  }
}

}  // namespace rf::optim
