#include "engine/train_engine.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/element_access.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/stopwatch.h"
#include "dist/text_collectives.h"
#include "engine/local_micro_batch.h"
#include "engine/pipeline/pipeline_executor.h"
#include "engine/pipeline/pipeline_simulator.h"
#include "engine/pipeline_stage.h"
#include "model/hf_weights.h"
#include "model/memory_estimate.h"
#include "model/param_init.h"
#include "model/tp_gather.h"

namespace rf::engine {
namespace {

// bf16 compute reads a bf16 copy of the f32 master weights; f32 compute reads the masters.
std::optional<model::ParamStore> make_compute_copy(DType compute, const model::ParamLayout& layout,
                                                   MemoryTracker& tracker) {
  if (compute != DType::bf16) return std::nullopt;
  return std::optional<model::ParamStore>(std::in_place, layout, DType::bf16,
                                          TensorAccount{&tracker, MemoryTier::device, MemoryCategory::params});
}

// Where the optimizer's state lives (adamw_optimizer.h). swap_optimizer: the moments, and with bf16 compute the
// f32 masters, which only the optimizer step, checkpoints and exports read, on the host tier (in f32 the masters
// are the weights the model reads). reuse_fp32_param: the masters are the bf16 copy plus `split`'s remainders.
// Either stages slices of the bucket size.
optim::StatePlacement state_placement(const EngineConfig& config, const dist::ParallelContext& parallel,
                                      optim::Fp32Split* split) {
  if (!config.swap_optimizer && !config.reuse_fp32_param) return {};
  optim::MasterHome masters = optim::MasterHome::device;
  if (config.reuse_fp32_param)
    masters = optim::MasterHome::split;
  else if (config.compute_dtype() == DType::bf16)
    masters = optim::MasterHome::host;
  return {.moments_on_host = config.swap_optimizer,
          .masters = masters,
          .slice_numel = config.bucket_size.value_or(optim::default_bucket_size(parallel.dp_cp().size())),
          .split = split};
}

// The f32 master store: on the device tier unless the model does not read it (bf16 compute) and the step stages
// it (swap_optimizer), or it is only a cache of the split masters (reuse_fp32_param), which readers see whole.
MemoryTier master_tier(const EngineConfig& config) {
  const bool off_device = config.reuse_fp32_param || (config.swap_optimizer && config.compute_dtype() == DType::bf16);
  return off_device ? MemoryTier::host : MemoryTier::device;
}

// reuse_fp32_param: the masters' remainders (params), beside the bf16 copy on the device tier, or on the host tier
// with swap_optimizer (only the step reads them).
std::optional<optim::Fp32Split> make_fp32_split(const EngineConfig& config, int64_t numel, MemoryTracker& tracker) {
  if (!config.reuse_fp32_param) return std::nullopt;
  const MemoryTier tier = config.swap_optimizer ? MemoryTier::host : MemoryTier::device;
  return std::optional<optim::Fp32Split>(std::in_place, numel, TensorAccount{&tracker, tier, MemoryCategory::params});
}

// This rank's place in its TP group, for the weights' layout (an MoE model trains at TP > 1 with SP only).
model::TensorParallelShard tp_shard_of(const EngineConfig& config, const model::ModelConfig& model_config,
                                       const dist::ParallelContext& parallel) {
  check_moe_training(config, model_config);
  if (config.tensor_model_parallel_size != parallel.tp().size())
    throw ConfigError("tensor_model_parallel_size",
                      fmt::format("{} but the engine's TP group has {} ranks", config.tensor_model_parallel_size,
                                  parallel.tp().size()));
  return config.tp_shard(parallel.tp().rank());
}

EngineConfig validated(EngineConfig config) {
  config.validate();
  return config;
}

// `model_config`, once the engine built for it is known to fit the memory budget: checked before the first
// allocation, so an absurd dimension is a named error instead of bad_alloc or the OOM killer.
const model::ModelConfig& fitting(const model::ModelConfig& model_config, const EngineConfig& config,
                                  const dist::ParallelContext& parallel, const MemoryTracker& tracker,
                                  int64_t max_tokens) {
  model::require_fits(model_config,
                      training_memory(model_config, config, parallel.tp().size(), parallel.dp_cp().size(),
                                      local_token_capacity(max_tokens, parallel)),
                      memory_budget(tracker), "train");
  return model_config;
}

// The first offset of each part CausalLm reports complete (index `layer` + 1: the embedding, layers
// 0..L-1, then the final norm and the head), -1 for the parts a pipeline stage does not hold. "Complete from
// this offset up" holds because the layout orders the parts as backward reverses them (a stage's chunks
// included: their last backwards run from the last chunk down); checked here, so a layout change cannot break
// it quietly. Tied embeddings at PP > 1: the last stage's copy of the embedding sits first and is never reported.
std::vector<int64_t> grads_ready_offsets(const model::ParamLayout& layout, int64_t num_layers) {
  const std::string layer_prefix = "model.layers.";
  auto part_of = [&](const std::string& name) -> int64_t {
    if (name.starts_with(layer_prefix)) return std::stoll(name.substr(layer_prefix.size())) + 1;
    if (name == "model.embed_tokens.weight") return 0;
    return num_layers + 1;  // model.norm.weight, lm_head.weight
  };
  std::vector<int64_t> offsets(size_t(num_layers + 2), -1);
  int64_t previous = 0;
  for (const model::ParamEntry& e : layout.entries()) {
    const int64_t part = part_of(e.name);
    RF_CHECK(part >= previous, "gradient buckets need the layout in layer order, but {} comes after a later layer",
             e.name);
    if (offsets[size_t(part)] < 0) offsets[size_t(part)] = e.offset;
    previous = part;
  }
  return offsets;
}

// The buckets' possible boundaries: where each part the stage holds starts.
std::vector<int64_t> part_boundaries(const std::vector<int64_t>& offsets) {
  std::vector<int64_t> boundaries;
  for (int64_t offset : offsets)
    if (offset >= 0) boundaries.push_back(offset);
  return boundaries;
}

// Where the parts after part `part` start: the end of what a forward reading part `part` needs.
int64_t end_of_part(const std::vector<int64_t>& offsets, size_t part, int64_t total) {
  for (size_t next = part + 1; next < offsets.size(); ++next)
    if (offsets[next] >= 0) return offsets[next];
  return total;
}

// Without overlap one bucket (Megatron's choice: nothing to overlap it with); sharded over DP with the
// distributed optimizer (at DP 1 it owns everything, the same as without).
optim::BucketPlan make_bucket_plan(const EngineConfig& config, const model::ParamLayout& layout,
                                   const std::vector<int64_t>& boundaries, const dist::ParallelContext& parallel) {
  const int dp = parallel.dp_cp().size();
  const int64_t bucket_size = config.overlap_grad_reduce
                                  ? config.bucket_size.value_or(optim::default_bucket_size(dp))
                                  : std::numeric_limits<int64_t>::max();
  const bool shard = config.use_distributed_optimizer && dp > 1;
  return optim::BucketPlan(layout, boundaries, bucket_size, shard ? dp : 1, shard ? parallel.dp_cp().rank() : 0);
}

// This rank's shard of f32 values (none without sharding), lent to the gradients' reduce-scatter during
// the last backward and reduce_gradients, then to the parameters' all-gather in optimizer_step.
Tensor make_shard_staging(const optim::BucketPlan& plan, MemoryTracker& tracker) {
  if (!plan.sharded()) return Tensor();
  return Tensor({plan.shard_numel()}, DType::f32, {&tracker, MemoryTier::device, MemoryCategory::workspace});
}

// The keys that change nothing in this layout or with this other key (STYLE: such a value logs a warning),
// once per role.
void warn_about_idle_keys(const EngineConfig& config, const dist::ParallelContext& parallel) {
  if (parallel.role().rank() != 0) return;
  if (!config.check_for_nan_in_loss_and_grad && config.nan_policy != NanPolicy::error)
    core::log_warning("megatron.nan_policy: has no effect with check_for_nan_in_loss_and_grad: false (nothing is "
                      "checked)");
  if (config.swap_optimizer && config.optimizer_offload)
    core::log_warning("megatron.optimizer_offload: with swap_optimizer the Adam moments are on the host tier "
                      "already: offloading the optimizer moves nothing");
  if (parallel.dp_cp().size() == 1) {
    for (const auto& [key, on] : {std::pair{"use_distributed_optimizer", config.use_distributed_optimizer},
                                  std::pair{"overlap_grad_reduce", config.overlap_grad_reduce},
                                  std::pair{"overlap_param_gather", config.overlap_param_gather}})
      if (on) core::log_warning("megatron.{}: true has no effect at data-parallel size 1", key);
    return;
  }
  if (config.overlap_param_gather && !config.overlap_grad_reduce)
    core::log_warning("megatron.overlap_param_gather: with overlap_grad_reduce off the weights form one bucket, "
                      "which the forward needs first: nothing overlaps");
  if (config.bucket_size && !config.overlap_grad_reduce && !config.swap_optimizer && !config.reuse_fp32_param)
    core::log_warning(
        "megatron.bucket_size: has no effect without overlap_grad_reduce (the gradients reduce as one bucket)");
}

}  // namespace

double PipelineTimes::busy_s() const {
  double busy = 0;
  for (double t : forward_s) busy += t;
  for (double t : backward_s) busy += t;
  return busy;
}

model::MemoryEstimate training_memory(const model::ModelConfig& c, const EngineConfig& config, int64_t tp_size,
                                      int64_t dp_size, int64_t max_tokens_per_micro_batch) {
  const DType compute = config.compute_dtype();
  // A pipeline stage holds about 1/PP of the model (the largest at least that much).
  const double pp = double(config.pipeline_model_parallel_size);
  const double f32 = double(dtype_size(DType::f32)), tp = double(tp_size);
  const double params = model::count_parameters(c) / tp / pp;
  model::MemoryEstimate estimate = model::weights_memory(c, DType::f32);
  estimate.params = params * (f32 + (compute == DType::f32 ? 0.0 : double(dtype_size(compute))));
  estimate.grads = params * f32;
  estimate.optimizer = 2.0 * params * f32 / double(config.use_distributed_optimizer ? dp_size : 1);
  // The swap optimizer keeps the moments, and the bf16 run's masters, on the host tier; reuse_fp32_param keeps the
  // masters as the bf16 copy plus a 16-bit remainder (on the host tier with swap).
  if (config.swap_optimizer) estimate.optimizer = 0;
  if (compute != DType::f32 && master_tier(config) == MemoryTier::host) {
    const bool remainder_on_device = config.reuse_fp32_param && !config.swap_optimizer;
    estimate.params = params * double(dtype_size(compute) + (remainder_on_device ? sizeof(int16_t) : 0));
  }
  // What forward saves per token and layer (AttentionSaved, MlpSaved: the residual stream before and after
  // attention, both normed inputs, q, k, v, the attention output, gate, up and their product, the norms'
  // and softmax's statistics), the head-wise ones split over TP; a micro-batch padded for sequence parallel.
  const double C = double(c.hidden_size), F = double(c.intermediate_size) / tp, H = double(c.num_attention_heads) / tp;
  const double HD = H * double(c.head_dim), KD = double(c.num_key_value_heads * c.head_dim) / tp;
  // An MoE layer keeps its k experts' activations per token instead of the MLP's: the smaller, for a lower bound.
  const double moe_F = double(c.moe.num_experts_per_tok * c.moe.moe_intermediate_size);
  const double per_token_layer = 4 * C + 2 * HD + 2 * KD + 3 * (c.moe.enabled() ? std::min(F, moe_F) : F) + H + 2;
  const int64_t multiple = config.sequence_parallel ? tp_size : 1;
  const int64_t tokens = (max_tokens_per_micro_batch + multiple - 1) / multiple * multiple;
  const double layers = double(c.num_hidden_layers) / pp;
  estimate.activations = layers * double(tokens) * per_token_layer * double(dtype_size(compute));
  // With recompute or offload, what the activation plan counts for one micro-batch on a stage of L / PP layers
  // (rounded down: a lower bound): less than the above. A model whose activations would not count in 64-bit
  // integers keeps the estimate above, which no budget holds anyway.
  if (estimate.activations < 0x1p60 && (config.recompute_granularity || config.recompute_activation_function ||
                                        config.recompute_norm || config.cpu_offloading)) {
    model::ModelSpan stage{.pre_process = false, .post_process = false};
    for (int64_t l = 0; l < std::max<int64_t>(1, int64_t(layers)); ++l) stage.hf_layers.push_back(l);
    const model::ActivationShape shape{.max_tokens = tokens,
                                       .tp_size = tp_size,
                                       .sequence_parallel = config.sequence_parallel,
                                       .dtype = compute};
    const model::ActivationPlan plan =
        model::plan_activations(c, {stage}, shape, config.recompute_policy(),
                                std::min<int64_t>(config.cpu_offloading_num_layers, int64_t(stage.hf_layers.size())));
    estimate.activations = double(plan.peak_bytes(plan.chunks[0].slot_bytes()));
  }
  return estimate;
}

TrainEngine::TrainEngine(const EngineConfig& engine_config, const optim::OptimConfig& optim_config,
                         const model::ModelConfig& model_config, const kernels::KernelRegistry& kernels,
                         dist::ParallelContext& parallel, MemoryTracker& tracker, int64_t max_tokens_per_micro_batch)
    : config_(validated(engine_config)),
      model_config_(fitting(model_config, config_, parallel, tracker, max_tokens_per_micro_batch)),
      compute_dtype_(engine_config.compute_dtype()),
      kernels_(kernels),
      parallel_(parallel),
      tracker_(tracker),
      master_(model::ParamLayout::for_stage(model_config, tp_shard_of(engine_config, model_config, parallel),
                                            stage_parts(pipeline_split_of(config_, model_config, parallel),
                                                        parallel.pp().rank())),
              DType::f32, {&tracker, master_tier(config_), MemoryCategory::params}),
      compute_copy_(make_compute_copy(compute_dtype_, master_.layout(), tracker)),
      fp32_split_(make_fp32_split(config_, master_.layout().total_numel(), tracker)),
      grads_(master_.layout(), DType::f32,
             {&tracker, MemoryTier::device, MemoryCategory::grads}),
      grads_ready_offsets_(grads_ready_offsets(master_.layout(), model_config.num_hidden_layers)),
      bucket_plan_(make_bucket_plan(config_, master_.layout(), part_boundaries(grads_ready_offsets_), parallel)),
      shard_staging_(make_shard_staging(bucket_plan_, tracker)),
      grad_reducer_(bucket_plan_, grads_, parallel.dp_cp(), shard_staging_, &tracker),
      param_gatherer_(bucket_plan_, shard_staging_, parallel.dp_cp(), &tracker),
      split_(pipeline_split_of(config_, model_config, parallel)),
      optimizer_(optim_config, master_, compute_copy_ ? &*compute_copy_ : nullptr, bucket_plan_, kernels, parallel,
                 &tracker, state_placement(config_, parallel, fp32_split_ ? &*fp32_split_ : nullptr)),
      scheduler_(optim_config),
      max_tokens_(local_token_capacity(max_tokens_per_micro_batch, parallel)) {
  if (config_.sequence_parallel != parallel.sequence_parallel())
    throw ConfigError("sequence_parallel", fmt::format("{} but the engine's parallel context has it {}",
                                                       config_.sequence_parallel, parallel.sequence_parallel()));
  // Megatron's check (validate() has the others; PP 1 here, so the chunk is the model).
  if (config_.cpu_offloading && config_.cpu_offloading_num_layers >= model_config.num_hidden_layers)
    throw ConfigError("cpu_offloading_num_layers",
                      fmt::format("{}: must be below the model's {} layers", config_.cpu_offloading_num_layers,
                                  model_config.num_hidden_layers));
  const model::ParamStore& weights = compute_copy_ ? *compute_copy_ : master_;
  const int64_t pp_rank = parallel.pp().rank(), num_chunks = split_.vp_size;
  for (int64_t v = 0; v < num_chunks; ++v) {
    chunks_.push_back(std::make_unique<model::CausalLm>(model_config_, chunk_span(split_, pp_rank, v), weights,
                                                        &grads_, kernels, parallel, &tracker));
    chunks_.back()->set_recompute(config_.recompute_policy());
    chunks_.back()->set_activation_offload(config_.cpu_offloading_num_layers);
    chunks_.back()->set_moe_losses(config_.moe_losses(model_config_));
    chunks_.back()->set_moe_experts(config_.moe_expert_options());
    chunks_.back()->reserve(max_tokens_);
  }
  chunk_grads_written_.assign(size_t(num_chunks), 0);
  grad_sync_enabled_.assign(size_t(num_chunks), 0);
  // One layers' pool per layer count and the head's pool, each with one micro-batch's room (what a step without
  // pipelining needs).
  std::vector<size_t> layer_counts;
  for (int64_t v = 0; v < num_chunks; ++v) {
    const size_t count = chunks_[size_t(v)]->span().hf_layers.size();
    const auto found = std::find(layer_counts.begin(), layer_counts.end(), count);
    pool_of_chunk_.push_back(size_t(found - layer_counts.begin()));
    if (found == layer_counts.end()) {
      layer_counts.push_back(count);
      pools_.emplace_back();
    }
  }
  for (int64_t v = 0; v < num_chunks; ++v) release_saved(v, acquire_saved(v));
  // What the swap optimizer keeps on the host tier has nothing to offload; the masters' cache of
  // reuse_fp32_param is dropped instead (release_master).
  const optim::StatePlacement& placement = optimizer_.placement();
  if (placement.masters == optim::MasterHome::device) params_offload_.add(master_.storage());
  if (compute_copy_) params_offload_.add(compute_copy_->storage());
  if (fp32_split_ && !config_.swap_optimizer) params_offload_.add(fp32_split_->storage());
  grads_offload_.add(grads_.storage());
  if (!placement.moments_on_host)
    for (Tensor* state : optimizer_.state_tensors()) optimizer_offload_.add(*state);
  release_master();
  for (int64_t v = 0; v < num_chunks; ++v) {
    model::CausalLm& chunk = *chunks_[size_t(v)];
    if (config_.overlap_grad_reduce && parallel.dp_cp().size() > 1)
      chunk.set_grads_ready_hook([this, v](int64_t layer) {
        if (!grad_sync_enabled_[size_t(v)]) return;
        // The embedding's bucket waits for the embedding group's sum (reduce_gradients).
        if (layer == -1 && sums_embedding_over_pipeline()) return;
        grad_reducer_.grads_ready(grads_ready_offsets_[size_t(layer + 1)]);
      });
    if (config_.overlap_param_gather && bucket_plan_.sharded())
      chunk.set_params_needed_hook([this](int64_t layer) {
        complete_param_gather(end_of_part(grads_ready_offsets_, size_t(layer + 1), master_.layout().total_numel()));
      });
  }
  if (parallel.role().rank() == 0 && split_.pp_size > 1) core::log_info("{}", split_.describe());
  std::vector<model::ModelSpan> spans;
  for (const auto& chunk : chunks_) spans.push_back(chunk->span());
  activation_plan_ = model::plan_activations(model_config_, spans, chunks_.front()->activation_shape(),
                                             config_.recompute_policy(), config_.cpu_offloading_num_layers);
  if (parallel.role().rank() == 0) {
    // Enough micro-batches for the schedule's in-flight peak to saturate: a multiple of the interleaving group.
    const int64_t saturating = 2 * config_.schedule_shape(split_, 1).group_size() * split_.vp_size;
    const int64_t peak = planned_activation_peak(saturating);
    core::log_info("activation recompute: {}; activations of micro-batches of up to {} tokens{}:\n{}",
                   model::describe(config_.recompute_policy()), max_tokens_,
                   split_.pp_size > 1 ? " on pipeline stage 0" : "",
                   activation_plan_.table(peak - activation_plan_.scratch_bytes(),
                                          split_.pp_size > 1 ? fmt::format("{} or more micro-batches", saturating)
                                                             : "one micro-batch"));
  }
  if (parallel.role().rank() == 0 && placement.staged()) log_state_placement();
  warn_about_idle_keys(config_, parallel);
}

void TrainEngine::log_state_placement() {
  const optim::StatePlacement& placement = optimizer_.placement();
  const int64_t slice = std::min(placement.slice_numel, bucket_plan_.shard_numel());
  if (config_.swap_optimizer) {
    int64_t moments = 0;
    for (Tensor* state : optimizer_.state_tensors()) moments += int64_t(state->allocated_bytes());
    std::string masters;
    if (placement.masters == optim::MasterHome::host)
      masters = fmt::format(" and the f32 master weights ({})",
                            format_bytes(int64_t(master_.storage().allocated_bytes())));
    if (fp32_split_)
      masters = fmt::format(" and the master weights' remainders ({})",
                            format_bytes(int64_t(fp32_split_->storage().allocated_bytes())));
    core::log_info("swap optimizer: the Adam moments of this rank's shard ({}){} on the host tier between steps, "
                   "staged for the step in slices of {} elements",
                   format_bytes(moments), masters, slice);
  }
  if (fp32_split_)
    core::log_info("reuse_fp32_param: the f32 master weights kept as the bf16 weights plus 16-bit remainders ({}), "
                   "saving the {} of a separate f32 copy; joined for the step in slices of {} elements",
                   format_bytes(int64_t(fp32_split_->storage().allocated_bytes())),
                   format_bytes(int64_t(master_.storage().allocated_bytes())), slice);
}

void TrainEngine::cache_master() const {
  if (!fp32_split_ || master_storage_->resident()) return;
  master_storage_->set_resident(true);
  fp32_split_->join(compute_copy_->flat(), 0, master_.flat());
}

void TrainEngine::release_master() const {
  if (fp32_split_) master_storage_->set_resident(false);
}

model::CausalLm& TrainEngine::model() {
  RF_CHECK(chunks_.size() == 1 && chunks_[0]->span().is_whole(model_config_),
           "the whole model is not on one rank: it is split over pipeline_model_parallel_size = {} stages",
           split_.pp_size);
  onload_for({.params = true});
  return *chunks_[0];
}

int64_t TrainEngine::planned_activation_peak(int64_t num_microbatches) const {
  const pipeline::ScheduleShape shape = config_.schedule_shape(split_, num_microbatches);
  pipeline::PipelineCosts costs = pipeline::uniform_costs(split_.pp_size, split_.vp_size, 1.0, 2.0);
  costs.activation_bytes.assign(size_t(split_.pp_size), activation_plan_.slot_bytes());  // this stage's row is read
  const pipeline::SimulationReport report =
      pipeline::simulate_pipeline(pipeline::make_pipeline_schedule(shape), costs);
  return activation_plan_.peak_bytes(report.stages[size_t(parallel_.pp().rank())].peak_activation_bytes);
}

namespace {

// A free slot of `pool`, made by `make` when none is free.
template <class Slot, class Make>
Slot& take_slot(std::vector<std::unique_ptr<Slot>>& all, std::vector<Slot*>& free, Make&& make) {
  if (free.empty()) {
    all.push_back(std::make_unique<Slot>(make()));
    free.push_back(all.back().get());
  }
  Slot& slot = *free.back();
  free.pop_back();
  return slot;
}

}  // namespace

TrainEngine::SavedMicroBatch& TrainEngine::acquire_saved(int64_t chunk) {
  model::CausalLm& model = *chunks_[size_t(chunk)];
  ActivationPool& pool = pools_[pool_of_chunk_[size_t(chunk)]];
  SavedMicroBatch& saved = take_slot(pool.all, pool.free, [&] {
    return SavedMicroBatch{.activations = model.make_layer_activations()};
  });
  if (!model.span().post_process) return saved;
  SavedMicroBatch& head = take_slot(head_pool_.all, head_pool_.free, [&] {
    const TensorAccount account{&tracker_, MemoryTier::device, MemoryCategory::workspace};
    const bool lm = model_config_.head == model::HeadKind::lm;
    return SavedMicroBatch{.activations = model.make_head_activations(),
                           .dlogp_N = lm ? Tensor({max_tokens_}, DType::f32, account) : Tensor(),
                           .dentropy_N = lm ? Tensor({max_tokens_}, DType::f32, account) : Tensor(),
                           .dvalues_N = lm ? Tensor() : Tensor({max_tokens_}, DType::f32, account)};
  });
  swap_head_part(saved, head);
  saved.head = &head;
  return saved;
}

void TrainEngine::release_saved(int64_t chunk, SavedMicroBatch& saved) {
  if (saved.head) {
    swap_head_part(saved, *saved.head);
    head_pool_.free.push_back(saved.head);
    saved.head = nullptr;
  }
  pools_[pool_of_chunk_[size_t(chunk)]].free.push_back(&saved);
}

void TrainEngine::swap_head_part(SavedMicroBatch& a, SavedMicroBatch& b) {
  std::swap(a.activations.head, b.activations.head);
  std::swap(a.activations.value, b.activations.value);
  std::swap(a.dlogp_N, b.dlogp_N);
  std::swap(a.dentropy_N, b.dentropy_N);
  std::swap(a.dvalues_N, b.dvalues_N);
}

model::OutputGrads TrainEngine::output_grads(SavedMicroBatch& saved, int64_t N, model::EntropyOutput entropy) const {
  model::OutputGrads grads;
  if (model_config_.head == model::HeadKind::lm) {
    grads.dlogp_N = saved.dlogp_N.view().slice(0, 0, N);
    if (entropy == model::EntropyOutput::compute) grads.dentropy_N = saved.dentropy_N.view().slice(0, 0, N);
  } else {
    grads.dvalues_N = saved.dvalues_N.view().slice(0, 0, N);
  }
  return grads;
}

bool TrainEngine::sums_embedding_over_pipeline() const {
  return split_.pp_size > 1 && model_config_.head == model::HeadKind::lm && model_config_.tie_word_embeddings &&
         master_.layout().holds_embedding();
}

void TrainEngine::sum_embedding_grads() {
  parallel_.group(dist::GroupKind::embedding).all_reduce(grads_.get("model.embed_tokens.weight"), dist::ReduceOp::sum);
}

void TrainEngine::offload(OffloadSet parts) {
  if (parts.params) {
    complete_param_gather(master_.layout().total_numel());  // its all-gather writes into the weights
    params_offload_.offload(OffloadContents::keep);
    release_master();  // a cache: joined again when read
  }
  if (parts.grads) {
    if (grad_reducer_.started()) reduce_gradients();  // its collectives write into the gradients
    grads_offload_.offload(grads_zeroed_ ? OffloadContents::discard : OffloadContents::keep);
  }
  if (parts.optimizer) optimizer_offload_.offload(OffloadContents::keep);
  if (parts.activations) set_activations_resident(false);
}

void TrainEngine::onload(OffloadSet parts) { onload_for(parts); }

void TrainEngine::onload_for(OffloadSet needed) const {
  if (needed.params) params_offload_.onload();
  if (needed.grads) grads_offload_.onload();
  if (needed.optimizer) optimizer_offload_.onload();
  if (needed.activations) set_activations_resident(true);
}

void TrainEngine::set_activations_resident(bool resident) const {
  if (chunks_[0]->activations_resident() == resident) return;
  for (const auto& chunk : chunks_) chunk->set_activations_resident(resident);
  auto apply = [resident](const ActivationPool& pool) {
    for (const auto& saved : pool.all) {
      saved->activations.for_each_tensor([resident](Tensor& t) {
        if (!t.empty()) t.set_resident(resident);
      });
      saved->activations.forward_done = false;
    }
  };
  for (const ActivationPool& pool : pools_) apply(pool);
  apply(head_pool_);
}

OffloadSet TrainEngine::offloaded() const {
  return {.params = params_offload_.offloaded(),
          .grads = grads_offload_.offloaded(),
          .optimizer = optimizer_offload_.offloaded(),
          .activations = !chunks_[0]->activations_resident()};
}

void TrainEngine::export_weights(const WeightSink& sink) const {
  onload_for({.params = true});
  complete_param_gather(master_.layout().total_numel());
  cache_master();
  for_each_whole_weight(master_, model_config_, parallel_, sink);
}

void TrainEngine::complete_param_gather(int64_t end) const {
  if (!param_gatherer_.pending()) return;
  for (const auto& [start, numel] : param_gatherer_.complete_below(end))
    copy_to_compute_weights(start, numel);
}

void TrainEngine::sync_compute_weights() { copy_to_compute_weights(0, master_.layout().total_numel()); }

void TrainEngine::copy_to_compute_weights(int64_t start, int64_t numel) const {
  if (!compute_copy_) return;
  const TensorView master = master_.flat().slice(0, start, numel), copy = compute_copy_->flat().slice(0, start, numel);
  if (fp32_split_)
    fp32_split_->split(master, copy, start);
  else
    copy_convert(master, copy);
}

void TrainEngine::init_random_weights(uint64_t seed) {
  onload_for({.params = true});
  complete_param_gather(master_.layout().total_numel());
  cache_master();
  model::init_params(master_, model_config_, seed);
  sync_compute_weights();
}

void TrainEngine::load_hf_weights(const std::string& model_dir) {
  onload_for({.params = true});
  complete_param_gather(master_.layout().total_numel());
  cache_master();
  model::load_hf_weights(master_, model_dir);
  sync_compute_weights();
}

void TrainEngine::load_hf_backbone(const std::string& model_dir, uint64_t seed) {
  onload_for({.params = true});
  complete_param_gather(master_.layout().total_numel());
  cache_master();
  model::load_hf_backbone(master_, model_config_, model_dir, seed);
  sync_compute_weights();
}

namespace {

// What a forward-only pass asks of forward_backward's loss: nothing.
LossOutput no_loss(const TensorMap&, const model::ModelOutputs&, const LossContext&, const model::OutputGrads&) {
  return {};
}

}  // namespace

std::vector<TensorMap> TrainEngine::compute_log_prob(const std::vector<TensorMap>& micro_batches, double temperature,
                                                     model::EntropyOutput entropy) {
  return forward_backward(micro_batches, no_loss, ForwardOnly::yes, entropy, temperature).outputs;
}

std::vector<TensorMap> TrainEngine::compute_values(const std::vector<TensorMap>& micro_batches) {
  return forward_backward(micro_batches, no_loss, ForwardOnly::yes).outputs;
}

ForwardBackwardResult TrainEngine::forward_backward(const std::vector<TensorMap>& micro_batches, const LossFn& loss_fn,
                                                    ForwardOnly forward_only, model::EntropyOutput entropy,
                                                    double temperature) {
  // A backward now would add to gradients that are already (being) summed over DP.
  RF_CHECK(forward_only == ForwardOnly::yes || (!grads_reduced_ && !grad_reducer_.started()),
           "forward_backward: this step's gradients are already reduced over the ranks; call optimizer_step "
           "before the next backward");
  onload_for({.params = true, .grads = forward_only == ForwardOnly::no, .activations = true});
  const int64_t M = int64_t(micro_batches.size());
  LossContext context;
  context.dp_size = parallel_.dp().size();
  context.num_microbatches = M;
  for (const TensorMap& mb : micro_batches) {
    const TensorView mask = mb.get("loss_mask");
    for (int64_t n = 0; n < mask.numel(); ++n) context.global_num_tokens += load_f64(mask, n) != 0.0;
    context.global_num_seqs += int64_t(mb.cu_seqlens().size()) - 1;
  }
  context.global_num_tokens = int64_t(parallel_.dp().all_reduce_scalar(double(context.global_num_tokens), dist::ReduceOp::sum));
  context.global_num_seqs = int64_t(parallel_.dp().all_reduce_scalar(double(context.global_num_seqs), dist::ReduceOp::sum));

  ForwardBackwardResult result;
  // Each DP rank's micro-batches contribute their share of the globally normalised loss. Summed before
  // the last backward, so that only the gradients' reduction runs between it and reduce_gradients; a
  // rank without micro-batches still joins the sum, before any bucket's collective as everywhere. Only the
  // last pipeline stage has a loss (its DP peers are last stages too).
  auto sum_loss_over_dp = [&] {
    result.loss = parallel_.dp().all_reduce_scalar(result.loss, dist::ReduceOp::sum);
  };
  if (M == 0) {
    sum_loss_over_dp();
    return result;
  }
  if (config_.expert_model_parallel_size > 1) {
    // Every MoE layer's forward and backward exchange rows with all EP ranks: each must run as many.
    dist::ProcessGroup& ep = parallel_.group(dist::GroupKind::ep);
    const double most = ep.all_reduce_scalar(double(M), dist::ReduceOp::max);
    const double fewest = ep.all_reduce_scalar(double(M), dist::ReduceOp::min);
    if (most != fewest)
      throw Error(fmt::format("expert_model_parallel_size: the EP ranks run {} to {} micro-batches in this pass; "
                              "expert parallelism needs every EP rank to run the same number",
                              fewest, most));
  }
  // The MoE layers' load-balancing losses (model/moe_losses.h): each micro-batch's weighted as the mean over the
  // step's micro-batches of every DP rank (the DP reduction sums), their values summed over this rank's passes.
  const bool moe_losses = config_.moe_losses(model_config_).any();
  double moe_aux_loss = 0, moe_z_loss = 0;
  // With an expert capacity, the (token, expert) pairs it dropped in this pass's forwards (moe/dropped_tokens).
  const bool counts_dropped = model_config_.moe.enabled() && !config_.moe_capacity().dropless();
  double moe_dropped = 0;
  const pipeline::PipelinePass pass =
      forward_only == ForwardOnly::yes ? pipeline::PipelinePass::forward_only : pipeline::PipelinePass::forward_backward;
  const int64_t stage = parallel_.pp().rank();
  const pipeline::PipelineSchedule schedule = pass_schedule(split_, config_, M, pass);
  const pipeline::StageActions& actions = schedule.stages[size_t(stage)];

  // Every micro-batch as this rank runs it (padded for SP, split for CP), alive until the schedule ends.
  std::vector<std::unique_ptr<LocalMicroBatch>> local;
  for (const TensorMap& mb : micro_batches)
    local.push_back(std::make_unique<LocalMicroBatch>(mb, temperature, parallel_, max_tokens_));
  // What each (micro-batch, chunk) in flight saved.
  std::map<std::pair<int64_t, int64_t>, SavedMicroBatch*> saved_of;
  std::vector<double> micro_batch_loss(size_t(M), 0.0);
  std::vector<std::string> output_lead(static_cast<size_t>(M));
  if (forward_only == ForwardOnly::yes) result.outputs.resize(size_t(M));

  pipeline::StageWork work;
  pipeline_times_ = {.forward_s = std::vector<double>(chunks_.size(), 0.0),
                     .backward_s = std::vector<double>(chunks_.size(), 0.0),
                     .num_microbatches = M};
  const Stopwatch schedule_clock;
  work.transfer_dtype = compute_dtype_;
  work.transfer_shape = [&](int64_t i) {
    const int64_t N = local[size_t(i)]->inputs().seq_len;
    return Shape{parallel_.sequence_parallel() ? N / parallel_.tp().size() : N, model_config_.hidden_size};
  };
  work.forward = [&](int64_t i, int64_t v, TensorView input) -> TensorView {
    const Stopwatch clock;
    model::CausalLm& chunk = *chunks_[size_t(v)];
    const TensorMap& mb = micro_batches[size_t(i)];
    LocalMicroBatch& micro_batch = *local[size_t(i)];
    SavedMicroBatch& saved = acquire_saved(v);
    model::ModelInputs in = micro_batch.inputs();
    in.hidden_NC = input;
    const model::ModelOutputs run =
        chunk.forward(in, entropy, saved.activations,
                      forward_only == ForwardOnly::yes ? model::CausalLm::SavedFor::nothing
                                                       : model::CausalLm::SavedFor::backward);
    if (v == 0) result.num_tokens += micro_batch.real_tokens();
    moe_dropped += double(saved.activations.moe_dropped);
    // Forward only, nothing is kept: the executor copies what it sends before the next action, and the head's
    // outputs are read below, before the slot goes back (which takes its head part back).
    if (forward_only == ForwardOnly::no) saved_of[{i, v}] = &saved;
    if (!chunk.span().post_process) {
      if (forward_only == ForwardOnly::yes) release_saved(v, saved);
      pipeline_times_.forward_s[size_t(v)] += clock.seconds();
      return run.hidden_NC;
    }
    // The loss sees the micro-batch's tokens (with CP every rank's, gathered) and its gradients go to this rank's.
    const model::ModelOutputs out = micro_batch.outputs(run);
    const model::OutputGrads run_grads = output_grads(saved, in.seq_len, entropy);
    const model::OutputGrads loss_grads = micro_batch.loss_grads(run_grads);
    const LossOutput loss = loss_fn(mb, out, context, loss_grads);
    micro_batch.local_grads(loss_grads, run_grads);
    result.loss += loss.loss;
    micro_batch_loss[size_t(i)] = loss.loss;
    if (i == M - 1) sum_loss_over_dp();
    for (const auto& [name, value] : loss.metrics) result.metrics[name] += value;
    if (forward_only == ForwardOnly::yes) {
      TensorMap& outputs = result.outputs[size_t(i)];
      if (!out.logp_N.empty()) outputs.set("log_probs", clone(out.logp_N, DType::f32));
      if (!out.entropy_N.empty()) outputs.set("entropy", clone(out.entropy_N, DType::f32));
      if (!out.values_N.empty()) outputs.set("values", clone(out.values_N, DType::f32));
      release_saved(v, saved);
    } else if (config_.check_for_nan_in_loss_and_grad) {
      output_lead[size_t(i)] = first_non_finite_output(out, loss_grads);
    }
    pipeline_times_.forward_s[size_t(v)] += clock.seconds();
    return {};
  };
  work.backward = [&](int64_t i, int64_t v, TensorView output_grad) -> TensorView {
    const Stopwatch clock;
    model::CausalLm& chunk = *chunks_[size_t(v)];
    SavedMicroBatch& saved = *saved_of.at({i, v});
    saved_of.erase({i, v});
    model::OutputGrads grads;
    if (chunk.span().post_process)
      grads = output_grads(saved, local[size_t(i)]->inputs().seq_len, entropy);
    else
      grads.dhidden_NC = output_grad;
    // The first backward after the gradients were zeroed writes the linear weights' gradients instead of
    // adding them (the same values, without reading the zeros); a chunk's weights are its own.
    char& written = chunk_grads_written_[size_t(v)];
    if (moe_losses) grads.moe_loss_scale = 1.0 / double(M * parallel_.dp().size());
    chunk.backward(grads, written ? kernels::Accumulate::add : kernels::Accumulate::overwrite, saved.activations);
    if (moe_losses) {
      moe_aux_loss += saved.activations.moe_losses.aux_loss * grads.moe_loss_scale;
      moe_z_loss += saved.activations.moe_losses.z_loss * grads.moe_loss_scale;
    }
    written = 1;
    grads_zeroed_ = false;
    release_saved(v, saved);
    if (config_.check_for_nan_in_loss_and_grad)
      findings_.note(i, M, micro_batch_loss[size_t(i)], std::move(output_lead[size_t(i)]), chunk.input_grad());
    pipeline_times_.backward_s[size_t(v)] += clock.seconds();
    return chunk.span().pre_process ? TensorView() : chunk.input_grad();
  };
  // Overlapped DP reduction starts in each chunk's last backward: earlier ones still add to every bucket. The
  // list's param_gather and launch_grad_sync points need nothing here: overlap_param_gather starts every bucket's
  // all-gather at the end of optimizer_step (before any chunk's first forward, each forward waiting for its own
  // layers), and reduce_gradients launches whatever bucket the backwards did not.
  work.enable_grad_sync = [&](int64_t v) { grad_sync_enabled_[size_t(v)] = config_.overlap_grad_reduce; };
  pipeline::run_stage_actions(actions, parallel_.pp(), work,
                              {&tracker_, MemoryTier::device, MemoryCategory::activations});
  std::fill(grad_sync_enabled_.begin(), grad_sync_enabled_.end(), 0);
  pipeline_times_.schedule_s = schedule_clock.seconds();
  if (split_.pp_size > 1) share_results_over_pipeline(result, micro_batches, forward_only, entropy);
  // This DP rank's share of the MoE metrics (the callers sum metrics over DP): every stage's layers, every CP (and
  // with SP, TP) rank's tokens.
  dist::ProcessGroup& token_ranks =
      parallel_.sequence_parallel() ? parallel_.group(dist::GroupKind::tp_cp) : parallel_.cp();
  auto over_stages_and_tokens = [&](double value) {
    for (dist::ProcessGroup* group : {&token_ranks, &parallel_.pp()})
      value = group->all_reduce_scalar(value, dist::ReduceOp::sum);
    return value;
  };
  if (moe_losses && forward_only == ForwardOnly::no) {
    result.metrics["moe/aux_loss"] = over_stages_and_tokens(moe_aux_loss);
    result.metrics["moe/z_loss"] = over_stages_and_tokens(moe_z_loss);
  }
  if (counts_dropped && forward_only == ForwardOnly::no)
    result.metrics["moe/dropped_tokens"] = over_stages_and_tokens(moe_dropped);
  return result;
}

void TrainEngine::share_results_over_pipeline(ForwardBackwardResult& result, const std::vector<TensorMap>& micro_batches,
                                              ForwardOnly forward_only, model::EntropyOutput entropy) {
  dist::ProcessGroup& pp = parallel_.pp();
  const int last = pp.size() - 1;
  const bool here = pp.rank() == last;
  result.loss = pp.all_reduce_scalar(here ? result.loss : 0.0, dist::ReduceOp::sum);  // x + 0 is x, exactly
  // The metrics' names, then their values in the name order std::map keeps.
  std::string names;
  for (const auto& [name, value] : result.metrics) names += name + '\n';
  names = dist::broadcast_text(pp, names, last);
  Tensor values({int64_t(std::count(names.begin(), names.end(), '\n'))}, DType::f64);
  if (here) {
    int64_t k = 0;
    for (const auto& [name, value] : result.metrics) values.data<double>()[k++] = value;
  }
  pp.broadcast(values, last);
  if (!here) {
    result.metrics.clear();
    size_t begin = 0;
    for (int64_t k = 0; k < values.numel(); ++k) {
      const size_t end = names.find('\n', begin);
      result.metrics[names.substr(begin, end - begin)] = values.data<double>()[k];
      begin = end + 1;
    }
  }
  if (forward_only == ForwardOnly::no) return;
  share_outputs_over_pipeline(pp, forward_output_keys(model_config_.head, entropy), micro_batches, result.outputs);
}

void TrainEngine::reduce_gradients() {
  if (grads_reduced_) return;
  onload_for({.grads = true});
  complete_param_gather(master_.layout().total_numel());  // it shares its staging buffer with the reduction
  // Before the DP reduction: with the distributed optimizer the first and last stages own different shards of
  // their embedding copies, so their sum must be of the unreduced gradients (sums commute: the same total).
  if (sums_embedding_over_pipeline()) sum_embedding_grads();
  grad_reducer_.finish();
  // After the DP sums: sums commute, and TP peers own the same shard ranges (megatron.md §4.5).
  for (auto& chunk : chunks_) chunk->finish_grads();
  grads_reduced_ = true;
}

double TrainEngine::optimizer_step(std::string_view update) {
  onload_for(OffloadSet::all());
  reduce_gradients();
  const double grad_norm = optimizer_.grad_norm(grads_);
  last_step_skipped_ = config_.check_for_nan_in_loss_and_grad && !step_is_finite(grad_norm, update);
  if (!last_step_skipped_) {
    release_master();  // reuse_fp32_param: the step updates the split masters, which the cache would not follow
    optimizer_.step(grads_, grad_norm, scheduler_.lr());
    if (bucket_plan_.sharded()) cache_master();  // the all-gather's buffer
    if (bucket_plan_.sharded() && config_.overlap_param_gather) {
      param_gatherer_.start(master_.flat());  // completed by the next forward, or whoever reads the weights
    } else if (bucket_plan_.sharded()) {
      param_gatherer_.gather(master_.flat());
      sync_compute_weights();
    }
  }
  zero_step_gradients();
  return grad_norm;
}

bool TrainEngine::step_is_finite(double grad_norm, std::string_view update) {
  // Each rank's verdict, reduced: a NaN reaches every rank's norm through the reductions, but a loss is
  // a rank's own, and the ranks must skip or stop together.
  const bool finite_here = std::isfinite(grad_norm) && findings_.losses_finite();
  if (parallel_.role().all_reduce_scalar(finite_here ? 0.0 : 1.0, dist::ReduceOp::max) == 0.0) return true;
  const std::string found = describe_non_finite_step(
      findings_, grad_norm, fragment_parts(bucket_plan_, grads_.flat(), FragmentIn::flat), master_.layout(),
      parallel_);
  if (config_.nan_policy == NanPolicy::error) {
    zero_step_gradients();  // the engine stays usable by a caller that catches this
    throw Error(fmt::format("[{}] {}: not finite: {}. Stopped before the optimizer applied it, so no weight "
                            "changed (megatron.nan_policy: skip_step would skip such a step instead)",
                            core::rank_label(), update, found));
  }
  ++num_skipped_steps_;
  if (parallel_.role().rank() == 0)
    core::log_warning("{}: not finite: {}. Skipping the optimizer step "
                      "(megatron.nan_policy: skip_step; {} skipped so far)",
                      update, found, num_skipped_steps_);
  return false;
}

void TrainEngine::zero_step_gradients() {
  grads_.zero();
  grad_reducer_.reset();
  grads_zeroed_ = true;
  std::fill(chunk_grads_written_.begin(), chunk_grads_written_.end(), 0);
  grads_reduced_ = false;
  findings_.clear();
}

double TrainEngine::lr_step() { return scheduler_.step(); }

TensorMap make_micro_batch(Tensor input_ids, Tensor position_ids, Tensor labels, std::vector<int32_t> cu_seqlens) {
  TensorMap mb;
  Tensor mask({labels.numel()}, DType::f32);
  for (int64_t n = 0; n < labels.numel(); ++n) mask.data<float>()[n] = load_f64(labels, n) >= 0 ? 1.0f : 0.0f;
  Tensor cu({int64_t(cu_seqlens.size())}, DType::i32);
  std::copy(cu_seqlens.begin(), cu_seqlens.end(), cu.data<int32_t>());
  mb.set("input_ids", std::move(input_ids));
  mb.set("position_ids", std::move(position_ids));
  mb.set("labels", std::move(labels));
  mb.set("loss_mask", std::move(mask));
  mb.set("cu_seqlens", std::move(cu));
  return mb;
}

}  // namespace rf::engine
