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
// The swap optimizer and bf16 parameter-copy reuse (MindSpeed's --swap-optimizer, --reuse-fp32-param;
// StatePlacement): state whose home is the host tier, or masters held split (fp32_split.h), come to two
// device-tier staging buffers a slice of the shard at a time for the step, the next slice's copy-in or join (a
// worker thread) overlapping the current slice's update, and go back once updated. AdamW is elementwise, so the
// slicing changes no bit. Between steps the staging buffers hold no device bytes.
#pragma once

#include <array>
#include <vector>

#include "dist/parallel_context.h"
#include "kernels/kernel_registry.h"
#include "model/param_store.h"
#include "optim/bucket_plan.h"
#include "optim/fp32_split.h"
#include "optim/optim_config.h"

namespace rf::optim {

// Where the master weights live between steps.
enum class MasterHome : uint8_t {
  device,  // the ParamStore given, on the device tier: updated in place
  host,    // the ParamStore given, on the host tier (swap_optimizer with bf16 compute): staged in and out
  split,   // the bf16 compute copy plus StatePlacement::split's remainders (reuse_fp32_param): joined into the
           // stage, split back; the ParamStore given is not read
};

struct StatePlacement {
  bool moments_on_host = false;  // swap_optimizer: the Adam moments are allocated on the host tier
  MasterHome masters = MasterHome::device;
  int64_t slice_numel = 0;       // elements of the shard staged at a time (>= 1 when staged())
  Fp32Split* split = nullptr;    // with MasterHome::split: the remainders of the whole ParamStore
  bool staged() const { return moments_on_host || masters != MasterHome::device; }
};

class AdamWOptimizer {
 public:
  // `compute_copy` may be null (f32 compute: the model reads `master` itself). `shards` (kept by
  // reference) says which parameters this rank updates; sharded over the context's DP group.
  AdamWOptimizer(const OptimConfig& config, const model::ParamStore& master, const model::ParamStore* compute_copy,
                 const BucketPlan& shards, const kernels::KernelRegistry& kernels, dist::ParallelContext& parallel,
                 MemoryTracker* tracker = nullptr, StatePlacement placement = {});

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
  const StatePlacement& placement() const { return placement_; }

 private:
  // One slice's device copies of the staged state, at the slice's shard offsets minus its start.
  struct Stage {
    Tensor exp_avg, exp_avg_sq, master;
  };
  // The views one fragment's update reads and writes: its state where it lives, or in `stage`.
  struct FragmentViews {
    TensorView master, exp_avg, exp_avg_sq;
  };
  // The squared norm of this rank's fragments, counting TP-replicated parameters on TP rank 0 only.
  double owned_sum_squares(const model::GradBuffer& grads) const;
  void update(const ShardFragment& f, const FragmentViews& views, const model::GradBuffer& grads, double coefficient,
              double lr);
  void staged_step(const model::GradBuffer& grads, double coefficient, double lr);
  FragmentViews views_of(const ShardFragment& f, const Stage& stage, int64_t slice_start) const;
  int64_t slice_start(size_t slice) const { return int64_t(slice) * placement_.slice_numel; }
  int64_t slice_numel(size_t slice) const;
  void stage_in(size_t slice, Stage& stage) const;
  void stage_out(size_t slice, const Stage& stage) const;

  OptimConfig config_;
  const model::ParamStore& master_;
  const model::ParamStore* compute_copy_;
  const BucketPlan& shards_;
  const kernels::KernelRegistry& kernels_;
  dist::ParallelContext& parallel_;
  StatePlacement placement_;
  Tensor exp_avg_, exp_avg_sq_;  // laid out like the shard (like the ParamStore without sharding)
  // Staged: the shard's fragments cut at multiples of slice_numel, per slice; two stages, one being
  // filled while the other is updated. Allocated up front, resident only during a step.
  std::vector<std::vector<ShardFragment>> slices_;
  std::array<Stage, 2> stages_;
  int64_t num_steps_ = 0;
};

}  // namespace rf::optim
