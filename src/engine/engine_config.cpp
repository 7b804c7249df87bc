#include "engine/engine_config.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace rf::engine {
namespace {

std::string_view module_name(RecomputeModule module) {
  for (const auto& [value, name] : enum_names(module))
    if (value == module) return name;
  return "?";
}

// Megatron's TransformerConfig checks, by the same keys.
void validate_recompute(const EngineConfig& c) {
  if (c.recompute_modules && c.recompute_granularity != RecomputeGranularity::selective)
    throw ConfigError("recompute_modules", "is set but recompute_granularity is not selective (it names what "
                                           "selective recompute discards)");
  for (const RecomputeModule module : c.recompute_modules.value_or(std::vector<RecomputeModule>{}))
    if (module != RecomputeModule::core_attn && module != RecomputeModule::mlp &&
        module != RecomputeModule::layernorm && module != RecomputeModule::moe)
      throw ConfigError("recompute_modules",
                        fmt::format("{}: recomputes part of {} layers, which is not built (core_attn, layernorm, mlp "
                                    "and moe are)",
                                    module_name(module),
                                    module == RecomputeModule::mla_up_proj ? "Multi-Latent Attention" : "MoE"));
  if (c.distribute_saved_activations) {
    if (c.recompute_granularity != RecomputeGranularity::full)
      throw ConfigError("distribute_saved_activations",
                        "true needs recompute_granularity: full (it splits the recomputed groups' inputs over TP)");
    if (c.sequence_parallel)
      throw ConfigError("distribute_saved_activations",
                        "true with sequence_parallel: the residual stream is split over TP already (Megatron refuses "
                        "the two together)");
  }
  if (c.recompute_granularity == RecomputeGranularity::full) {
    if (!c.recompute_method)
      throw ConfigError("recompute_method", "null but recompute_granularity is full: expected uniform or block");
    if (!c.recompute_num_layers)
      throw ConfigError("recompute_num_layers",
                        "null but recompute_granularity is full: expected the group size (uniform) or the number of "
                        "layers to recompute per model chunk (block), >= 1");
    if (*c.recompute_num_layers < 1)
      throw ConfigError("recompute_num_layers", fmt::format("must be >= 1, got {}", *c.recompute_num_layers));
    return;
  }
  if (c.recompute_method)
    throw ConfigError("recompute_method", "is set but recompute_granularity is not full (it says how full "
                                          "recompute groups the layers)");
  if (c.recompute_num_layers)
    throw ConfigError("recompute_num_layers", "is set but recompute_granularity is not full (Megatron refuses it "
                                              "with selective too)");
}

// Megatron's checks of cpu_offloading, by the same keys.
void validate_offloading(const EngineConfig& c) {
  if (c.cpu_offloading_weights)
    throw ConfigError("cpu_offloading_weights", "true: offloading the weights during the forward is not built "
                                                "(param_offload offloads them between stages)");
  if (!c.cpu_offloading) {
    if (c.cpu_offloading_num_layers != 0)
      throw ConfigError("cpu_offloading_num_layers", "is set but cpu_offloading is false");
    return;
  }
  if (!c.cpu_offloading_activations)
    throw ConfigError("cpu_offloading_activations", "false with cpu_offloading: true and no weight offload: nothing "
                                                    "would be offloaded");
  if (c.cpu_offloading_num_layers < 1)
    throw ConfigError("cpu_offloading_num_layers",
                      fmt::format("must be >= 1 with cpu_offloading: true, got {}", c.cpu_offloading_num_layers));
  if (c.recompute_granularity || c.recompute_activation_function || c.recompute_norm)
    throw ConfigError("cpu_offloading", "true with activation recompute (recompute_granularity, "
                                        "recompute_activation_function or recompute_norm): Megatron refuses "
                                        "activation offload together with recompute");
  if (c.pipeline_model_parallel_size > 1)
    throw ConfigError("cpu_offloading", "true with pipeline_model_parallel_size > 1: Megatron refuses activation "
                                        "offload with pipeline parallel");
}

}  // namespace

void EngineConfig::validate() const {
  // The axes the engine does not run yet: a config written for them fails here, at read time, on
  // every rank alike, instead of running without them.
  if (tensor_model_parallel_size < 1)
    throw ConfigError("tensor_model_parallel_size", fmt::format("must be >= 1, got {}", tensor_model_parallel_size));
  if (make_vocab_size_divisible_by < 1)
    throw ConfigError("make_vocab_size_divisible_by",
                      fmt::format("must be >= 1, got {}", make_vocab_size_divisible_by));
  if (sequence_parallel && tensor_model_parallel_size == 1)
    throw ConfigError("sequence_parallel", "true needs tensor_model_parallel_size > 1 (it splits the sequence over TP)");
  if (pipeline_model_parallel_size < 1)
    throw ConfigError("pipeline_model_parallel_size", fmt::format("must be >= 1, got {}", pipeline_model_parallel_size));
  pipeline_split.validate();
  // What needs no layer count is refused here, at read time; make_pipeline_split checks the rest against the
  // model (pipeline_layout()).
  if (pipeline_split.virtual_pipeline_model_parallel_size.value_or(1) > 1 && pipeline_model_parallel_size == 1)
    throw ConfigError("virtual_pipeline_model_parallel_size",
                      fmt::format("{} needs pipeline_model_parallel_size > 1 (virtual stages interleave the stages "
                                  "of a pipeline)", *pipeline_split.virtual_pipeline_model_parallel_size));
  if (microbatch_group_size_per_vp_stage) {
    if (pipeline_split.virtual_pipeline_model_parallel_size.value_or(1) == 1)
      throw ConfigError("microbatch_group_size_per_vp_stage",
                        "is set but virtual_pipeline_model_parallel_size is not > 1 (it groups the micro-batches of "
                        "the interleaved schedule only)");
    if (*microbatch_group_size_per_vp_stage < pipeline_model_parallel_size)
      throw ConfigError("microbatch_group_size_per_vp_stage",
                        fmt::format("{} is below pipeline_model_parallel_size = {} (Megatron needs P <= N)",
                                    *microbatch_group_size_per_vp_stage, pipeline_model_parallel_size));
  }
  if (context_parallel_size < 1)
    throw ConfigError("context_parallel_size", fmt::format("must be >= 1, got {}", context_parallel_size));
  if (expert_model_parallel_size < 1)
    throw ConfigError("expert_model_parallel_size", fmt::format("must be >= 1, got {}", expert_model_parallel_size));
  if (expert_tensor_parallel_size && *expert_tensor_parallel_size != 1 &&
      *expert_tensor_parallel_size != tensor_model_parallel_size)
    throw ConfigError("expert_tensor_parallel_size",
                      fmt::format("{}: expected null, 1 or tensor_model_parallel_size = {} (an expert grid whose TP "
                                  "differs from the dense one is not built)",
                                  *expert_tensor_parallel_size, tensor_model_parallel_size));
  if (moe_tp_extend_ep && expert_tensor_parallel_size.value_or(1) != 1)
    throw ConfigError("moe_tp_extend_ep",
                      fmt::format("true extends EP over the TP ranks, but expert_tensor_parallel_size = {} splits "
                                  "the experts over them: set it to 1 or null",
                                  *expert_tensor_parallel_size));
  if (moe_shared_expert_overlap && moe_token_dispatcher_type != model::MoeDispatcher::alltoall)
    throw ConfigError("moe_shared_expert_overlap",
                      "true overlaps the shared expert with the alltoall dispatcher's exchanges; the allgather "
                      "dispatcher has none to hide it behind (as Megatron, which allows it with alltoall only)");
  moe_capacity().validate("");
  if (moe_expert_capacity_factor && *moe_expert_capacity_factor <= 0)
    throw ConfigError("moe_expert_capacity_factor",
                      fmt::format("must be positive (or null: dropless), got {}", *moe_expert_capacity_factor));
  for (const auto& [key, value] : {std::pair{"moe_aux_loss_coeff", moe_aux_loss_coeff},
                                   std::pair{"moe_z_loss_coeff", moe_z_loss_coeff}})
    if (!(value >= 0) || !std::isfinite(value))
      throw ConfigError(key, fmt::format("must be a finite number >= 0, got {}", value));
  if (bucket_size && *bucket_size < 1)
    throw ConfigError("bucket_size", fmt::format("must be >= 1 element (or null), got {}", *bucket_size));
  // Megatron asserts this too: without the distributed optimizer there are no parameters to gather.
  if (overlap_param_gather && !use_distributed_optimizer)
    throw ConfigError("overlap_param_gather",
                      "true needs use_distributed_optimizer: true (it overlaps that optimizer's all-gather)");
  validate_recompute(*this);
  validate_offloading(*this);
  if (reuse_fp32_param && compute_dtype() != DType::bf16)
    throw ConfigError("reuse_fp32_param",
                      fmt::format("true needs dtype: bfloat16 (it keeps the f32 masters as the bf16 compute weights "
                                  "plus a remainder; with {} there is no bf16 copy to reuse)", dtype));
  compute_dtype();
}

model::RecomputePolicy EngineConfig::recompute_policy() const {
  model::RecomputePolicy policy;
  if (recompute_granularity == RecomputeGranularity::full) {
    policy.full = true;
    policy.method = *recompute_method;
    policy.num_layers = *recompute_num_layers;
    policy.distribute_saved_activations = distribute_saved_activations;
  }
  if (recompute_granularity == RecomputeGranularity::selective)
    for (const RecomputeModule module : recompute_modules.value_or(std::vector{RecomputeModule::core_attn})) {
      policy.selective.core_attn |= module == RecomputeModule::core_attn;
      policy.selective.layernorm |= module == RecomputeModule::layernorm;
      policy.selective.mlp |= module == RecomputeModule::mlp;
      policy.selective.moe |= module == RecomputeModule::moe;
    }
  policy.selective.activation = recompute_activation_function;
  policy.selective.layernorm |= recompute_norm;
  policy.selective.moe |= moe_layer_recompute;
  return policy;
}

model::CapacityConfig EngineConfig::moe_capacity() const {
  return {.capacity_factor = moe_expert_capacity_factor.value_or(0.0),
          .drop_policy = moe_token_drop_policy,
          .pad_to_capacity = moe_pad_expert_input_to_capacity};
}

model::MoeLossConfig EngineConfig::moe_losses(const model::ModelConfig& model_config) const {
  if (moe_aux_loss_coeff > 0 || moe_z_loss_coeff > 0)
    return {.balancing = moe_router_load_balancing_type,
            .aux_coeff = moe_aux_loss_coeff,
            .z_coeff = moe_z_loss_coeff};
  const model::MoeConfig& moe = model_config.moe;
  if (moe.enabled() && moe.output_router_logits)
    return {.balancing = model::MoeBalancing::hf_pooled, .aux_coeff = moe.router_aux_loss_coef};
  return {};
}

model::PipelineSplit EngineConfig::pipeline_layout(int64_t num_hidden_layers) const {
  return model::make_pipeline_split(pipeline_split, num_hidden_layers, pipeline_model_parallel_size);
}

DType EngineConfig::compute_dtype() const {
  if (dtype == "bfloat16" || dtype == "bf16") return DType::bf16;
  if (dtype == "float32" || dtype == "fp32" || dtype == "f32") return DType::f32;
  throw ConfigError("dtype", fmt::format("'{}': expected bfloat16 or float32", dtype));
}

}  // namespace rf::engine
