// EngineConfig: verl's `megatron:` block (verl.md §3; the same type the RL config reads under
// actor_rollout_ref.actor.megatron). Tensor, pipeline (with virtual stages) and data parallel run at any
// size the ranks provide, and context parallel too (cp_comm_type: how its attention communicates, model/
// context_attention.h), and expert parallel for MoE models (model/moe_block.h, moe_dispatch.h) with Megatron's MoE
// keys (moe_*: the dispatcher, the load-balancing losses; what is not built yet is refused by name). The pipeline's
// layer-split keys (model/pipeline_split.h) sit in the same block, as Megatron's and MindSpeed's flags do beside
// --pipeline-model-parallel-size. The data-parallel keys are Megatron's DDP options (megatron.md §4); at DP 1 they
// change nothing, and the engine says so in a warning.
// recompute_granularity / recompute_method / recompute_num_layers / recompute_modules /
// distribute_saved_activations are Megatron's activation recompute, recompute_activation_function and recompute_norm
// MindSpeed's (model/recompute_policy.h; verl spells them under override_transformer_config as well).
// swap_optimizer and reuse_fp32_param are MindSpeed's optimizer-memory features (--swap-optimizer,
// --reuse-fp32-param; verl spells them under override_transformer_config): TrainEngine and AdamWOptimizer's
// StatePlacement, optim/fp32_split.h.
// check_for_nan_in_loss_and_grad is Megatron's key (on by default there too); nan_policy is rlforge's: what a
// non-finite loss or gradient does, stop the run (Megatron's behaviour) or skip that optimizer step (what
// Megatron does on its fp16 loss scaler's found_inf).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "dist/parallel_context.h"
#include "engine/pipeline/pipeline_schedule.h"
#include "model/model_config.h"
#include "model/moe_capacity.h"
#include "model/moe_dispatch.h"
#include "model/moe_block.h"
#include "model/moe_losses.h"
#include "model/param_layout.h"
#include "model/pipeline_split.h"
#include "model/recompute_policy.h"

namespace rf::engine {

enum class NanPolicy : uint8_t { error, skip_step };
enum class RecomputeGranularity : uint8_t { full, selective };

constexpr std::array<std::pair<RecomputeGranularity, std::string_view>, 2> enum_names(RecomputeGranularity) {
  return {{{RecomputeGranularity::full, "full"}, {RecomputeGranularity::selective, "selective"}}};
}

// Megatron's recompute_modules; those of MoE and MLA layers are refused by name until such layers exist.
enum class RecomputeModule : uint8_t { core_attn, mlp, layernorm, moe_act, moe, shared_experts, mla_up_proj };

constexpr std::array<std::pair<RecomputeModule, std::string_view>, 7> enum_names(RecomputeModule) {
  return {{{RecomputeModule::core_attn, "core_attn"},
           {RecomputeModule::mlp, "mlp"},
           {RecomputeModule::layernorm, "layernorm"},
           {RecomputeModule::moe_act, "moe_act"},
           {RecomputeModule::moe, "moe"},
           {RecomputeModule::shared_experts, "shared_experts"},
           {RecomputeModule::mla_up_proj, "mla_up_proj"}}};
}

constexpr std::array<std::pair<NanPolicy, std::string_view>, 2> enum_names(NanPolicy) {
  return {{{NanPolicy::error, "error"}, {NanPolicy::skip_step, "skip_step"}}};
}

struct EngineConfig {
  int64_t tensor_model_parallel_size = 1;
  int64_t make_vocab_size_divisible_by = 128;
  int64_t pipeline_model_parallel_size = 1;
  model::PipelineSplitConfig pipeline_split;
  std::optional<int64_t> microbatch_group_size_per_vp_stage;  // null: pipeline_model_parallel_size
  int64_t context_parallel_size = 1;
  dist::CpCommType cp_comm_type = dist::CpCommType::p2p;
  int64_t expert_model_parallel_size = 1;
  std::optional<int64_t> expert_tensor_parallel_size;  // null: Megatron's default (the TP size)
  bool moe_tp_extend_ep = false;
  model::MoeDispatcher moe_token_dispatcher_type = model::MoeDispatcher::alltoall;
  bool moe_grouped_gemm = true;
  bool moe_layer_recompute = false;
  bool moe_shared_expert_overlap = false;
  model::MoeBalancing moe_router_load_balancing_type = model::MoeBalancing::aux_loss;
  double moe_aux_loss_coeff = 0.0;
  double moe_z_loss_coeff = 0.0;
  std::optional<double> moe_expert_capacity_factor;  // null: dropless
  model::TokenDropPolicy moe_token_drop_policy = model::TokenDropPolicy::probs;
  bool moe_pad_expert_input_to_capacity = false;
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  std::optional<int64_t> bucket_size;  // elements; null: Megatron's max(40M, 1M x DP)
  std::string dtype = "bfloat16";  // compute dtype: bfloat16 or float32 (our extension: f32 runs in f32)
  uint64_t seed = 42;
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;
  bool release_activations = false;
  bool swap_optimizer = false;
  bool reuse_fp32_param = false;
  std::optional<RecomputeGranularity> recompute_granularity;  // null: every layer saves its activations
  std::optional<model::RecomputeMethod> recompute_method;
  std::optional<int64_t> recompute_num_layers;
  std::optional<std::vector<RecomputeModule>> recompute_modules;  // null: Megatron's default, [core_attn]
  bool recompute_activation_function = false;
  bool recompute_norm = false;
  bool distribute_saved_activations = false;
  bool cpu_offloading = false;
  int64_t cpu_offloading_num_layers = 0;
  bool cpu_offloading_activations = true;
  bool cpu_offloading_weights = false;
  bool check_for_nan_in_loss_and_grad = true;
  NanPolicy nan_policy = NanPolicy::error;

  template <class Fields>
  void fields(Fields& f) {
    f("tensor_model_parallel_size", tensor_model_parallel_size, "TP size");
    f("pipeline_model_parallel_size", pipeline_model_parallel_size,
      "PP size: the decoder layers split over this many stages, run with 1F1B (interleaved with virtual stages)");
    pipeline_split.fields(f);
    f("microbatch_group_size_per_vp_stage", microbatch_group_size_per_vp_stage,
      "interleaved 1F1B: micro-batches run through one virtual stage before the next (null: "
      "pipeline_model_parallel_size); needs pipeline_model_parallel_size <= it <= the micro-batches of a pass");
    f("context_parallel_size", context_parallel_size,
      "CP size: every sequence split over this many ranks (each document in 2 x CP chunks, a rank taking chunks r and "
      "2 CP - 1 - r), attention communicating as cp_comm_type says; the weights are replicas over CP");
    f("cp_comm_type", cp_comm_type,
      "Megatron's context-parallel attention: p2p (ring attention, each block's keys sent on while the previous "
      "computes), all_gather (keys and values gathered, no overlap, more memory), a2a (Ulysses: heads traded for the "
      "sequence; the query and kv heads per TP rank must divide by CP)");
    f("expert_model_parallel_size", expert_model_parallel_size,
      "EP size (MoE models): each EP rank runs E / EP of every MoE layer's experts on the tokens all EP ranks route "
      "to them (the EP ranks are data-parallel ranks); every rank keeps all experts' weights");
    f("expert_tensor_parallel_size", expert_tensor_parallel_size,
      "ETP size: null (Megatron's default: the TP size) or the TP size (each expert's FFN split over the TP ranks "
      "as the dense MLP, its rows all-gathered over them after the dispatch and its partial outputs "
      "reduce-scattered before the combine), or 1 (whole experts on every TP rank, the TP ranks' own tokens); other "
      "sizes are refused");
    f("moe_tp_extend_ep", moe_tp_extend_ep,
      "MindSpeed's TP-extend-EP: the TP ranks extend the EP group (E / (EP x TP) whole experts per rank, "
      "expert_tensor_parallel_size 1), so experts are never split over TP");
    f("moe_token_dispatcher_type", moe_token_dispatcher_type,
      "how routed tokens reach their experts' EP ranks: alltoall (row counts all-gathered, then one all-to-all of "
      "the rows) or allgather (every token of the EP group, with its routing, gathered on every rank; the outputs "
      "summed back to the tokens' ranks)");
    f("moe_grouped_gemm", moe_grouped_gemm,
      "Megatron's grouped GEMM: every local expert's rows in one call (tiles over all experts in one parallel "
      "region); false: Megatron's SequentialMLP, a linear call per expert (the same products, bit for bit on the "
      "batch-invariant GEMM)");
    f("moe_layer_recompute", moe_layer_recompute,
      "Megatron's: every MoE layer keeps only its input and runs its MoE block's forward (router, dispatch, experts) "
      "again in backward (recompute_modules' moe, with any recompute_granularity); the same bits");
    f("moe_shared_expert_overlap", moe_shared_expert_overlap,
      "run the shared expert's gate/up while the routed rows travel to their experts and its down projection while "
      "their outputs travel back (forward, alltoall dispatcher; the same results); needs a model with a shared "
      "expert");
    f("moe_router_load_balancing_type", moe_router_load_balancing_type,
      "aux_loss (per layer and micro-batch), seq_aux_loss (per document, averaged) or none; weighted by "
      "moe_aux_loss_coeff (Megatron's global_aux_loss and sinkhorn are not built)");
    f("moe_aux_loss_coeff", moe_aux_loss_coeff,
      "weight of the load-balancing loss (0: none; model/moe_losses.h). Without it a Hugging Face MoE model's "
      "output_router_logits: true adds HF's pooled loss at router_aux_loss_coef");
    f("moe_z_loss_coeff", moe_z_loss_coeff, "weight of the router z-loss (0: none)");
    f("moe_expert_capacity_factor", moe_expert_capacity_factor,
      "null: dropless; else each expert takes at most ceil(tokens x k / E x factor) of a micro-batch's tokens (this "
      "rank's), the others' choices of it dropped (weight 0)");
    f("moe_token_drop_policy", moe_token_drop_policy,
      "with a capacity, the tokens an expert keeps: probs (the highest weights) or position (the earliest)");
    f("moe_pad_expert_input_to_capacity", moe_pad_expert_input_to_capacity,
      "with a capacity, every expert gets exactly its capacity (filled with zero-weight tokens)");
    f("make_vocab_size_divisible_by", make_vocab_size_divisible_by,
      "with TP > 1 the vocabulary is padded to a multiple of this x TP (padding masked, never exported)");
    f("sequence_parallel", sequence_parallel, "sequence parallelism (with TP > 1)");
    f("use_distributed_optimizer", use_distributed_optimizer,
      "ZeRO-1 over DP: each DP rank keeps the Adam moments of 1/DP of the parameters and updates only those");
    f("overlap_grad_reduce", overlap_grad_reduce,
      "start each gradient bucket's DP reduction during the step's last backward, as soon as it is complete");
    f("overlap_param_gather", overlap_param_gather,
      "all-gather the distributed optimizer's updated weights in the background, each bucket awaited by the next "
      "forward just before the layer that reads it (needs overlap_grad_reduce's buckets to overlap anything)");
    f("bucket_size", bucket_size,
      "gradient bucket size in elements with overlap_grad_reduce (null: max(40M, 1M x DP)); one bucket without. "
      "Also the slice size of swap_optimizer and reuse_fp32_param's optimizer step");
    f("dtype", dtype, "compute dtype: bfloat16 (bf16 compute, f32 master weights) or float32");
    f("seed", seed, "seed of the weight initialisation");
    f("param_offload", param_offload, "offload weights between uses");
    f("grad_offload", grad_offload, "offload gradients between uses");
    f("optimizer_offload", optimizer_offload, "offload optimizer state between uses");
    f("release_activations", release_activations,
      "rlforge: give the activation buffers' memory back while the role is idle (PyTorch frees a pass's "
      "activations when it ends); they are taken again, zeroed, by the next pass (page faults: slower)");
    f("swap_optimizer", swap_optimizer,
      "MindSpeed's swap optimizer: the Adam moments (and, with bf16 compute, the f32 master weights) live on the "
      "host tier during forward and backward and come to the device a slice of bucket_size elements (null: "
      "max(40M, 1M x DP)) of this rank's shard at a time for the optimizer step, the next slice's copy overlapped "
      "with the current one's update; bit-identical training");
    f("reuse_fp32_param", reuse_fp32_param,
      "MindSpeed's bf16 parameter-copy reuse (bfloat16 only): each f32 master weight is kept as its bf16 compute "
      "weight plus a 16-bit remainder, 4 bytes per parameter instead of 6, joined back for the optimizer step a "
      "slice at a time; bit-identical training");
    f("recompute_granularity", recompute_granularity,
      "Megatron's activation recompute, bit-identical gradients either way: full (a recomputed layer saves only its "
      "group's input and re-runs the group's forward in backward), selective (every layer discards what "
      "recompute_modules names and recomputes it at the start of its backward) or null. A forward-only role "
      "(reference, reward model) saves nothing, so there it changes nothing, as in Megatron");
    f("recompute_method", recompute_method,
      "with full: uniform (each model chunk's layers in consecutive groups of recompute_num_layers) or block (each "
      "of a chunk's first recompute_num_layers layers recomputed, the rest saved)");
    f("recompute_num_layers", recompute_num_layers, "with full: the group size (uniform) or layer count (block)");
    f("recompute_modules", recompute_modules,
      "with selective: what each layer discards and recomputes: core_attn (the attention output and its softmax "
      "statistics, from q, k, v), layernorm (both pre-norms' outputs, from the residual stream), mlp (everything the "
      "MLP saves, from its input), moe (everything an MoE layer's block saves, its forward run again from its input, "
      "as moe_layer_recompute); null: [core_attn]. moe_act, shared_experts and mla_up_proj are refused (not "
      "built)");
    f("recompute_activation_function", recompute_activation_function,
      "MindSpeed's: every saving layer discards its SwiGLU product and recomputes it from the kept gate and up "
      "projections before the down projection's backward (with any recompute_granularity)");
    f("recompute_norm", recompute_norm,
      "MindSpeed's: every saving layer discards both pre-norms' outputs and recomputes them in backward (the same "
      "as recompute_modules' layernorm, with any recompute_granularity)");
    f("distribute_saved_activations", distribute_saved_activations,
      "Megatron's, with full recompute at TP > 1 without sequence parallel: each TP rank keeps 1/TP of a recomputed "
      "group's input and the group's backward all-gathers it before recomputing");
    f("cpu_offloading", cpu_offloading,
      "Megatron's activation offload: the saved activations of each model chunk's first cpu_offloading_num_layers "
      "layers wait on the host tier between their forward and their backward, prefetched one layer ahead (no result "
      "changes; not with recompute or pipeline parallel, as in Megatron)");
    f("cpu_offloading_num_layers", cpu_offloading_num_layers, "with cpu_offloading: the layers whose activations go");
    f("cpu_offloading_activations", cpu_offloading_activations, "with cpu_offloading: offload activations (must be true)");
    f("cpu_offloading_weights", cpu_offloading_weights,
      "Megatron's weight offload during the forward: not built (param_offload offloads weights between stages); "
      "rlforge's default false, true refused");
    f("check_for_nan_in_loss_and_grad", check_for_nan_in_loss_and_grad,
      "Megatron's: before each optimizer step, check every micro-batch's loss and the gradient norm for NaN/Inf "
      "(one decision for all the role's ranks); nan_policy says what a non-finite one does. false: nothing is "
      "checked and a non-finite gradient reaches the weights (saving non-finite weights is refused all the same)");
    f("nan_policy", nan_policy,
      "rlforge: what check_for_nan_in_loss_and_grad does on a non-finite loss or gradient: error (stop the run "
      "before the optimizer applies it, naming the step, role, micro-batch and first non-finite tensor) or "
      "skip_step (as Megatron on a found_inf: no update, Adam moments and step count and the LR schedule left as "
      "they were, gradients zeroed; counted in <role>/skipped_steps, train/skipped_steps for SFT)");
  }
  void validate() const;
  DType compute_dtype() const;
  model::RecomputePolicy recompute_policy() const;
  // The MoE layers' training losses for `model_config`: these keys', else its HF output_router_logits.
  model::MoeLossConfig moe_losses(const model::ModelConfig& model_config) const;
  model::CapacityConfig moe_capacity() const;
  model::MoeExpertOptions moe_expert_options() const {
    return {.capacity = moe_capacity(),
            .grouped_gemm = moe_grouped_gemm,
            .dispatcher = moe_token_dispatcher_type,
            .shared_expert_overlap = moe_shared_expert_overlap};
  }
  // The ranks the experts are split over (expert_model_parallel_size, times the TP size with moe_tp_extend_ep)
  // and each expert's FFN (the TP size unless expert_tensor_parallel_size is 1 or moe_tp_extend_ep).
  int64_t expert_parallel_ranks() const {
    return expert_model_parallel_size * (moe_tp_extend_ep ? tensor_model_parallel_size : 1);
  }
  int64_t expert_tensor_parallel_ranks() const {
    return moe_tp_extend_ep ? 1 : expert_tensor_parallel_size.value_or(tensor_model_parallel_size);
  }
  // TP rank `rank`'s place for the weights' layout.
  model::TensorParallelShard tp_shard(int64_t rank) const {
    return {.rank = rank,
            .size = tensor_model_parallel_size,
            .vocab_multiple = make_vocab_size_divisible_by,
            .split_experts = expert_tensor_parallel_ranks() > 1};
  }
  // The layer split of a model of `num_hidden_layers` layers over the pipeline (one stage at PP 1):
  // ConfigError naming the key for a split that does not fit the model.
  model::PipelineSplit pipeline_layout(int64_t num_hidden_layers) const;
  // PP > 1 or a layer-split key set: then the split depends on the model's layer count, and the commands check
  // pipeline_layout() against the model before any work. Otherwise the one stage holds every layer.
  bool splits_layers() const {
    return pipeline_model_parallel_size > 1 || pipeline_split != model::PipelineSplitConfig{};
  }
  // The schedule of a training pass of `num_microbatches` micro-batches per data-parallel rank over `split`
  // (this config's pipeline_layout()). Its validate() is the ConfigError the engine raises for a count the
  // interleaved schedule cannot take, keyed relative to this block.
  pipeline::ScheduleShape schedule_shape(const model::PipelineSplit& split, int64_t num_microbatches) const {
    return {.num_stages = split.pp_size,
            .num_chunks = split.vp_size,
            .num_microbatches = num_microbatches,
            .microbatch_group_size = microbatch_group_size_per_vp_stage.value_or(0)};
  }
  int64_t virtual_pipeline_size() const { return pipeline_split.virtual_pipeline_model_parallel_size.value_or(1); }
  // A non-finite step is skipped and the run goes on: its trainer logs <role>/skipped_steps.
  bool skips_non_finite_steps() const { return check_for_nan_in_loss_and_grad && nan_policy == NanPolicy::skip_step; }
};

}  // namespace rf::engine
