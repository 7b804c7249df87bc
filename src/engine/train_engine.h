// TrainEngine: the only thing the trainers (SFT today, RL later) train through (DESIGN §4).
// It owns the model's weights (f32 master + the compute copy), gradients, optimizer and LR schedule,
// and runs micro-batches given as TensorMaps through forward, a caller's loss function and backward.
// The model is an LM (the actor) or a value model (the critic: model_config.h's HeadKind).
//
// Loss aggregation is exact whatever the micro-batching: before any forward, the engine counts the
// loss tokens and sequences of the whole step (over DP ranks too) into a LossContext, so a loss
// function can scale its micro-batch's contribution by the global counts.
//
// Data parallel: a step's global batch is a list of micro-batches, and each DP rank passes
// forward_backward its own contiguous slice of it (rank r of DP takes micro-batches [r M/DP, (r+1) M/DP)
// of M, which is what makes the result independent of DP: the one-rank run of all M is the reference);
// the TP ranks of one DP rank pass the same slice. Because the loss is normalised by the global counts,
// the gradients are summed over DP (grad_reducer.h: bucketed, optionally overlapped with the last
// backward). With use_distributed_optimizer each DP rank keeps Adam moments for, and updates, only its
// shard of the parameters (optim/bucket_plan.h), then all-gathers the updated weights; the full f32
// master weights stay on every rank (exports and checkpoints read them). With overlap_param_gather the
// all-gather runs in the background from the end of optimizer_step, and the next forward waits for
// each bucket just before the layer that reads it (CausalLm's params-needed hook); everything that
// reads the weights otherwise (master_weights, export, checkpoints) waits for all of it first.
//
// Pipeline parallel (Megatron §3): the engine's pipeline group splits the decoder layers as the megatron block's
// split keys say (model/pipeline_split.h); this rank holds and runs its stage's V chunks (a CausalLm each, over one
// ParamStore of the stage's parameters: ParamLayout::for_stage), and forward_backward runs the stage's action
// list (pipeline/pipeline_schedule.h: 1F1B, interleaved with V > 1) through the executor
// (pipeline/pipeline_executor.h). Every rank is handed the same micro-batches; the loss, the metrics and the
// forward-only outputs come from the last stage and every rank of the pipeline returns them. Tied embeddings: the
// last stage keeps a copy of the embedding as its lm_head, whose gradient is summed with the first stage's over
// the embedding group before the DP reduction (so the copies stay equal); the grad norm counts it once. At PP 1
// the executor runs the no-pipelining list: forward then backward of each micro-batch, as before.
//
// Idle-role offload (verl.md §3.4, DESIGN §9): offload() moves the parts of the state an OffloadSet
// names to the host tier between stages, and they come back bit for bit at the same addresses, by
// onload() or by the first call that needs them (forward_backward: params, and grads unless
// forward-only; reduce_gradients: grads; optimizer_step and load_checkpoint: everything; save_checkpoint:
// params and optimizer; export_weights, master_weights(), model(): params; grads(): grads; optimizer():
// optimizer). So offloading changes where bytes are, never a result. OffloadSet::activations gives the
// activation buffers' memory back (no copy: a pass's activations are dead once it ends); forward_backward
// takes them again.
//
// Optimizer memory (MindSpeed's, issue #23): with swap_optimizer the Adam moments of this rank's shard, and with
// bf16 compute the f32 masters (the whole store: only the step, checkpoints and exports read it), are allocated on
// the host tier and staged to the device a slice at a time by the optimizer step (optim/adamw_optimizer.h's
// StatePlacement); readers of the masters and moments read the host copies, which are always current. With
// reuse_fp32_param (bf16 only) the masters are the bf16 copy plus a 16-bit remainder each (optim/fp32_split.h):
// master_ is then a host-tier cache, joined on demand for the readers above (master_weights, export_weights,
// checkpoints, the distributed optimizer's all-gather) and dropped before each step; the step joins a slice at a
// time into its own staging buffer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/offload.h"
#include "engine/engine_config.h"
#include "engine/grad_reducer.h"
#include "engine/non_finite_check.h"
#include "engine/offload_set.h"
#include "engine/shard_gatherer.h"
#include "engine/tensor_map.h"
#include "engine/whole_weights.h"
#include "model/activation_plan.h"
#include "model/causal_lm.h"
#include "model/memory_estimate.h"
#include "optim/adamw_optimizer.h"
#include "optim/lr_scheduler.h"

namespace rf::engine {

struct LossContext {
  int64_t global_num_tokens = 0;  // sum of loss_mask over the step's micro-batches and DP ranks
  int64_t global_num_seqs = 0;    // documents (cu_seqlens entries) over the same
  int64_t dp_size = 1;
  int64_t num_microbatches = 0;
};

// What a loss function returns for one micro-batch: its contribution to the step's loss (the
// contributions sum to the step's loss) and metrics to sum over micro-batches.
struct LossOutput {
  double loss = 0;
  std::map<std::string, double> metrics;
};

// Writes dL/d(each output of the model) into `grads`' views, [N] f32 and zeroed before the call: dlogp_N
// (and dentropy_N when the step asked for entropy, else empty) for an LM, dvalues_N for a value model
// (model_config.h's HeadKind); the others are empty.
using LossFn = std::function<LossOutput(const TensorMap& micro_batch, const model::ModelOutputs& outputs,
                                        const LossContext& context, const model::OutputGrads& grads)>;

enum class ForwardOnly : uint8_t { no, yes };

// Where the last forward_backward's time went on this rank: per chunk, its forwards' and backwards' seconds summed
// over the micro-batches, and the whole schedule's (compute, transfers and waiting). What the pipeline simulator
// replays to predict a step, and what a measured bubble is computed from.
struct PipelineTimes {
  std::vector<double> forward_s, backward_s;
  double schedule_s = 0;
  int64_t num_microbatches = 0;
  double busy_s() const;  // every forward and backward
};

struct ForwardBackwardResult {
  double loss = 0;                        // the step's: summed over micro-batches and DP ranks
  std::map<std::string, double> metrics;  // summed over this rank's micro-batches
  int64_t num_tokens = 0;                 // tokens this rank ran (padding-free)
  // Per micro-batch, forward_only only, f32 [N]: an LM's "log_probs" (and "entropy"), a value model's "values".
  std::vector<TensorMap> outputs;
};

class TrainEngine {
 public:
  // Before allocating anything, a lower bound of what it will hold (weights, gradients, Adam moments, the
  // residual stream for micro-batches of up to max_tokens_per_micro_batch) is checked against the tracker's
  // device budget, or the machine's memory (core/memory_budget.h): a model that cannot fit is a ConfigError
  // naming the dimension, the model config's source, the estimate and the budget.
  TrainEngine(const EngineConfig& engine_config, const optim::OptimConfig& optim_config,
              const model::ModelConfig& model_config, const kernels::KernelRegistry& kernels,
              dist::ParallelContext& parallel, MemoryTracker& tracker, int64_t max_tokens_per_micro_batch);

  void init_random_weights(uint64_t seed);
  void load_hf_weights(const std::string& model_dir);
  // The folder's backbone under this model's head, drawn from `seed` (model/hf_weights.h): verl's critic
  // built from the actor's LM folder.
  void load_hf_backbone(const std::string& model_dir, uint64_t seed);

  // `temperature` divides the logits before the softmax (verl's actor reads its log-probs at the
  // rollout's temperature, both in compute_log_prob and in the update). A value model reads neither it
  // nor `entropy`.
  ForwardBackwardResult forward_backward(const std::vector<TensorMap>& micro_batches, const LossFn& loss_fn,
                                         ForwardOnly forward_only,
                                         model::EntropyOutput entropy = model::EntropyOutput::skip,
                                         double temperature = 1.0);
  // The forward-only passes of RL on a training engine (verl's compute_log_prob / compute_values on the
  // actor and the critic): per micro-batch "log_probs" (and, when asked, "entropy") at `temperature`, or a
  // value model's "values", as InferEngine returns them. No loss, no gradients.
  std::vector<TensorMap> compute_log_prob(const std::vector<TensorMap>& micro_batches, double temperature,
                                          model::EntropyOutput entropy);
  std::vector<TensorMap> compute_values(const std::vector<TensorMap>& micro_batches);
  // Completes the step's gradients across the parallel ranks once its last backward has run: the DP
  // sum of every bucket (waiting for those the backward started), then the TP sums of
  // CausalLm::finish_grads. Called by optimizer_step; callers that read the gradients first call it
  // themselves. Idempotent until the gradients are zeroed; no backward may run in between.
  // With the distributed optimizer only this rank's shard of grads() holds the reduced gradient.
  void reduce_gradients();
  const model::GradBuffer& grads() const {
    onload_for({.grads = true});
    return grads_;
  }
  // Returns the pre-clip grad norm; gradients are zeroed for the next step. With the distributed
  // optimizer it also all-gathers the updated weights over DP.
  // With check_for_nan_in_loss_and_grad, a loss (of any micro-batch since the last step) or gradient
  // that is not finite on any rank of the role (one decision for all of them) does, by nan_policy:
  //   error      throws, before anything is applied, an Error naming `update` (the caller's words for
  //              the step and role, e.g. "step 3, actor update, mini-batch 2 of 4"), the micro-batch and
  //              the first non-finite output or parameter gradient (by HF name);
  //   skip_step  no update (Megatron's found_inf): weights, Adam moments and step count stay as they were,
  //              the gradients are zeroed, last_step_skipped() is true and num_skipped_steps() counts it.
  //              Megatron does not advance the LR schedule on a skipped step: that is the caller's lr_step.
  double optimizer_step(std::string_view update = "optimizer step");
  bool last_step_skipped() const { return last_step_skipped_; }
  int64_t num_skipped_steps() const { return num_skipped_steps_; }  // over the run (kept in checkpoints)
  double lr_step();         // advances the schedule; returns the new lr
  double lr() const { return scheduler_.lr(); }

  // Checkpoints under `component` (e.g. "actor"): the f32 master weights by HF name ("model"), the
  // AdamW moments by parameter ("optimizer": exp_avg.<name>, exp_avg_sq.<name>) and the step counts.
  // Weights or moments holding a NaN or Inf on any rank are refused, naming the tensor, before any file
  // is written (non_finite_check.h).
  // Saving is collective over the engine's ranks, with a writer over the same ranks; each writes its
  // part as boxes of the global tensors (checkpoint_shards.h), so a step saved at one TP x DP layout,
  // with or without the distributed optimizer, loads at any other. Loading restores everything, so
  // training continues as it would have; a checkpoint of another model shape is an IoError naming
  // the tensor.
  void save_checkpoint(checkpoint::CheckpointWriter& writer, const std::string& component) const;
  void load_checkpoint(const checkpoint::CheckpointReader& reader, const std::string& component);

  // Every weight by HF name, whole (the f32 master, gathered over TP and, with PP, sent from the stage that
  // holds it to every stage), one at a time: the hybrid engine's sync into the rollout's layout, which keeps its
  // own shard (RolloutEngine::update_weights), and HF exports. Collective over the TP and pipeline groups;
  // only one gathered tensor is alive at a time.
  using WeightSink = engine::WeightSink;
  void export_weights(const WeightSink& sink) const;

  // Offloads the parts `parts` names (those already offloaded stay so). Host copies are accounted
  // under the engine's tracker on the host tier, in the same categories. Gradients that are all zero
  // (no backward since the last optimizer_step) are dropped, not copied, and come back as zeros.
  // Params: an overlapped all-gather still in flight is completed first. Grads: a DP reduction in
  // flight is finished first (reduce_gradients: collective, as every rank runs the same stages).
  void offload(OffloadSet parts);
  // Brings the parts back. Each part comes back whole or, when the device tier's budget cannot hold
  // it, not at all: the tracker's error propagates and the part stays offloaded and intact.
  void onload(OffloadSet parts);
  OffloadSet offloaded() const;

  // The model reads the weights: they are onloaded. The references below read zeros while their part
  // is offloaded again. The whole model: pipeline size 1 only (an Error naming the size otherwise).
  model::CausalLm& model();
  const model::PipelineSplit& pipeline_split() const { return split_; }
  // What this stage's chunks keep for their backwards (model/activation_plan.h), as allocated.
  const model::ActivationPlan& activation_plan() const { return activation_plan_; }
  // The plan's activation peak for a training pass of `num_microbatches` micro-batches per DP rank: the scratch
  // and the in-flight micro-batches at the schedule's worst moment on this stage (the pipeline simulator's replay).
  int64_t planned_activation_peak(int64_t num_microbatches) const;
  const model::ModelConfig& model_config() const { return model_config_; }
  // Complete: waits for an overlapped parameter all-gather still in flight.
  const model::ParamStore& master_weights() const {
    onload_for({.params = true});
    complete_param_gather(master_.layout().total_numel());
    cache_master();
    return master_;
  }
  // The weights the model reads (the bf16 copy, or the f32 masters in f32), onloaded and complete: what a
  // rollout of the same layout and dtype reads in place (RolloutEngine's shared weights). The storage keeps
  // its address for the engine's life; call again before each read, as offloading makes it read zeros.
  const model::ParamStore& compute_weights() const {
    onload_for({.params = true});
    complete_param_gather(master_.layout().total_numel());
    return compute_copy_ ? *compute_copy_ : master_;
  }
  const optim::AdamWOptimizer& optimizer() const {
    onload_for({.optimizer = true});
    return optimizer_;
  }
  const optim::BucketPlan& bucket_plan() const { return bucket_plan_; }
  const GradSyncTimes& grad_sync_times() const { return grad_reducer_.times(); }
  const PipelineTimes& pipeline_times() const { return pipeline_times_; }
  optim::AdamWOptimizer& optimizer() {
    onload_for({.optimizer = true});
    return optimizer_;
  }
  optim::LrScheduler& scheduler() { return scheduler_; }
  DType compute_dtype() const { return compute_dtype_; }
  int64_t num_parameters() const { return master_.layout().num_parameters(); }

 private:
  void sync_compute_weights();  // master -> bf16 copy (and remainders) after loading weights
  // Elements [start, start + numel) of the masters into the compute copy: rounded, or split (reuse_fp32_param).
  void copy_to_compute_weights(int64_t start, int64_t numel) const;
  void log_state_placement();  // swap_optimizer, reuse_fp32_param: where the state is, once at start-up
  // reuse_fp32_param: the f32 masters joined into master_ (a host-tier cache) for a reader, or given back. The
  // split masters are the truth; the cache goes before each step changes them. Logically const, as onload_for.
  // Nothing to do otherwise.
  void cache_master() const;
  void release_master() const;
  // check_for_nan_in_loss_and_grad's decision for the step about to be applied (collective over the role):
  // true when every loss and the gradient are finite; otherwise nan_policy's error throws, skip_step
  // counts the step and returns false.
  bool step_is_finite(double grad_norm, std::string_view update);
  void zero_step_gradients();  // after a step, applied or not
  // What a micro-batch in flight holds on a chunk: its activations and, with the head, the loss's gradients of
  // the model's outputs (an LM's dlogp and dentropy, or a value model's dvalues). Two pools: the layers' parts,
  // shared by the stage's chunks of one layer count (the chunks of an interleaved stage peak at different times,
  // and a shared pool holds only their live peak), and the head's parts with the output gradients, lent to a
  // layer slot for a micro-batch on the head's chunk (`head` the slot it came from). A pool per chunk shape would
  // hold the head chunk's layers apart and its peak on top of the others' (31% above the live peak at PP 2 x
  // VPP 2). Grown on demand, never shrunk.
  struct SavedMicroBatch {
    model::CausalLm::Activations activations;
    Tensor dlogp_N, dentropy_N, dvalues_N;
    SavedMicroBatch* head = nullptr;
  };
  struct ActivationPool {
    std::vector<std::unique_ptr<SavedMicroBatch>> all;
    std::vector<SavedMicroBatch*> free;
  };
  SavedMicroBatch& acquire_saved(int64_t chunk);
  void release_saved(int64_t chunk, SavedMicroBatch& saved);
  static void swap_head_part(SavedMicroBatch& a, SavedMicroBatch& b);  // the head's activations and output grads
  // The heads of `saved`'s output-gradient buffers for a run of N tokens: those of the model's outputs.
  model::OutputGrads output_grads(SavedMicroBatch& saved, int64_t N, model::EntropyOutput entropy) const;
  // The last stage's loss, metrics and forward-only outputs, on every stage of the pipeline.
  void share_results_over_pipeline(ForwardBackwardResult& result, const std::vector<TensorMap>& micro_batches,
                                   ForwardOnly forward_only, model::EntropyOutput entropy);
  // Tied embeddings at PP > 1: the first and last stages' gradients of their embedding copies summed.
  bool sums_embedding_over_pipeline() const;
  void sum_embedding_grads();
  // overlap_param_gather: finishes the all-gather of the weights at buffer offsets below `end` (and
  // their bf16 copy). Logically const: the weights only become what optimizer_step made them.
  void complete_param_gather(int64_t end) const;
  // Onloads what of `needed` is offloaded. Logically const: the contents are what they were.
  void onload_for(OffloadSet needed) const;
  // Every chunk's activations and workspace and the pooled micro-batches' activations given back to the OS
  // (false) or taken again (true). Logically const, as onload_for: a pass's activations are dead once it ends.
  void set_activations_resident(bool resident) const;

  EngineConfig config_;
  model::ModelConfig model_config_;
  DType compute_dtype_;
  const kernels::KernelRegistry& kernels_;
  dist::ParallelContext& parallel_;
  MemoryTracker& tracker_;
  model::ParamStore master_;
  std::optional<model::ParamStore> compute_copy_;  // bf16 weights the model reads
  // reuse_fp32_param: the masters' remainders; mutable as the overlapped all-gather completes inside const accessors.
  mutable std::optional<optim::Fp32Split> fp32_split_;
  Tensor* master_storage_ = &master_.storage();    // for cache_master / release_master
  model::GradBuffer grads_;
  // From which GradBuffer offset up the gradients are final after each of CausalLm's grads-ready
  // reports, indexed by the report's `layer` + 1; also the buckets' boundaries.
  std::vector<int64_t> grads_ready_offsets_;
  optim::BucketPlan bucket_plan_;
  Tensor shard_staging_;  // distributed optimizer: the reduce-scatters' output, then the all-gather's input
  GradReducer grad_reducer_;
  mutable ShardGatherer param_gatherer_;  // its gather may complete inside const accessors
  bool grads_zeroed_ = true;  // no backward since the GradBuffer was last zeroed (it starts zeroed)
  bool grads_reduced_ = false;  // reduce_gradients ran since the last zeroing
  MicroBatchFindings findings_;  // of this step's micro-batches, with check_for_nan_in_loss_and_grad
  bool last_step_skipped_ = false;
  int64_t num_skipped_steps_ = 0;
  model::PipelineSplit split_;
  std::vector<std::unique_ptr<model::CausalLm>> chunks_;  // this stage's, in forward order
  std::vector<char> chunk_grads_written_;  // a chunk's backward ran since the gradients were zeroed
  std::vector<char> grad_sync_enabled_;    // overlap: the chunk's running backward is its step's last
  optim::AdamWOptimizer optimizer_;
  optim::LrScheduler scheduler_;
  int64_t max_tokens_ = 0;  // a micro-batch's, padded for sequence parallel
  model::ActivationPlan activation_plan_;
  std::vector<ActivationPool> pools_;  // the layers' parts, one pool per layer count
  std::vector<size_t> pool_of_chunk_;
  ActivationPool head_pool_;
  PipelineTimes pipeline_times_;
  // The tensors of each OffloadSet part; mutable as the const accessors onload them.
  mutable OffloadGroup params_offload_, grads_offload_, optimizer_offload_;
};

// A lower bound of what a TrainEngine of this model and layout allocates on each rank (model/memory_estimate.h):
// its 1/TP of the f32 masters and compute copy, gradients and Adam moments (1/DP of them with the distributed
// optimizer), what forward saves per token and layer for micro-batches of up to max_tokens_per_micro_batch,
// and the tensors' bookkeeping. The constructor refuses a model above its budget with it; a trainer may ask
// before it builds anything of the model's size.
model::MemoryEstimate training_memory(const model::ModelConfig& model_config, const EngineConfig& config,
                                      int64_t tp_size, int64_t dp_size, int64_t max_tokens_per_micro_batch);

// The tokens' next-token targets and loss mask for SFT-style micro-batches: a TensorMap with
// input_ids, position_ids, labels, loss_mask and cu_seqlens from packed sequences.
TensorMap make_micro_batch(Tensor input_ids, Tensor position_ids, Tensor labels, std::vector<int32_t> cu_seqlens);

}  // namespace rf::engine
