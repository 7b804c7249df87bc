#include "engine/pipeline_stage.h"

#include <fmt/format.h>

namespace rf::engine {

model::PipelineSplit pipeline_split_of(const EngineConfig& config, const model::ModelConfig& model_config,
                                       const dist::ParallelContext& parallel) {
  if (config.pipeline_model_parallel_size != parallel.pp().size())
    throw ConfigError("pipeline_model_parallel_size",
                      fmt::format("{} but the engine's pipeline group has {} ranks",
                                  config.pipeline_model_parallel_size, parallel.pp().size()));
  if (config.context_parallel_size != parallel.cp().size())
    throw ConfigError("context_parallel_size", fmt::format("{} but the engine's context-parallel group has {} ranks",
                                                           config.context_parallel_size, parallel.cp().size()));
  if (config.cp_comm_type != parallel.cp_comm_type())
    throw ConfigError("cp_comm_type", "differs from the engine's parallel context's");
  check_context_parallel(config, model_config);
  check_expert_parallel(config, model_config);
  if (config.expert_parallel_ranks() != parallel.layout().dims().expert_model_parallel_size)
    throw ConfigError("expert_model_parallel_size",
                      fmt::format("{} ({} ranks with moe_tp_extend_ep) but the engine's parallel layout has {}",
                                  config.expert_model_parallel_size, config.expert_parallel_ranks(),
                                  parallel.layout().dims().expert_model_parallel_size));
  if (model_config.moe.enabled() && config.expert_tensor_parallel_ranks() > 1 &&
      config.expert_tensor_parallel_ranks() != parallel.layout().dims().expert_tensor_size())
    throw ConfigError("expert_tensor_parallel_size",
                      fmt::format("{} but the engine's parallel layout has {}", config.expert_tensor_parallel_ranks(),
                                  parallel.layout().dims().expert_tensor_size()));
  return config.pipeline_layout(model_config.num_hidden_layers);
}

void check_expert_parallel(const EngineConfig& config, const model::ModelConfig& model_config) {
  const int64_t ep = config.expert_parallel_ranks(), experts = model_config.moe.num_experts;
  const char* key = config.moe_tp_extend_ep ? "moe_tp_extend_ep" : "expert_model_parallel_size";
  if (ep > 1 && !model_config.moe.enabled())
    throw ConfigError(key, fmt::format("{}: {} has no MoE layers to split the experts of", ep, model_config.source));
  if (ep > 1 && experts % ep != 0)
    throw ConfigError(key, fmt::format("{} ranks (expert_model_parallel_size {}{}) do not divide the model's "
                                       "num_experts = {}",
                                       ep, config.expert_model_parallel_size,
                                       config.moe_tp_extend_ep ? " x the TP size" : "", experts));
  if (config.moe_shared_expert_overlap && model_config.moe.shared_expert_intermediate_size == 0)
    throw ConfigError("moe_shared_expert_overlap",
                      fmt::format("true, but {} has no shared expert to overlap", model_config.source));
}

void check_moe_training(const EngineConfig& config, const model::ModelConfig& model_config) {
  if (model_config.moe.enabled() && config.tensor_model_parallel_size > 1 && !config.sequence_parallel)
    throw ConfigError("sequence_parallel",
                      fmt::format("false with tensor_model_parallel_size {} and an MoE model: training MoE layers at "
                                  "TP > 1 needs sequence parallel (as Megatron's)",
                                  config.tensor_model_parallel_size));
}

void check_context_parallel(const EngineConfig& config, const model::ModelConfig& model_config) {
  const int64_t cp = config.context_parallel_size, tp = config.tensor_model_parallel_size;
  const int64_t heads = model_config.num_attention_heads / tp, kv_heads = model_config.num_key_value_heads / tp;
  if (cp > 1 && config.cp_comm_type == dist::CpCommType::a2a && (heads % cp != 0 || kv_heads % cp != 0))
    throw ConfigError("cp_comm_type",
                      fmt::format("a2a (Ulysses) gives each of the context_parallel_size = {} ranks a share of the "
                                  "heads, but a TP rank's {} query heads and {} kv heads (num_attention_heads = {}, "
                                  "num_key_value_heads = {} over TP {}) do not both divide by it; use p2p or "
                                  "all_gather",
                                  cp, heads, kv_heads, model_config.num_attention_heads,
                                  model_config.num_key_value_heads, tp));
}

model::StageParts stage_parts(const model::PipelineSplit& split, int64_t pp_rank) {
  model::StageParts parts;
  parts.embedding = split.chunk(pp_rank, 0).pre_process;
  parts.head = split.chunk(pp_rank, split.vp_size - 1).post_process;
  for (int64_t v = 0; v < split.vp_size; ++v)
    for (int64_t layer : split.chunk(pp_rank, v).layers())
      if (auto hf = split.hf_layer(layer)) parts.hf_layers.push_back(*hf);
  return parts;
}

model::ModelSpan chunk_span(const model::PipelineSplit& split, int64_t pp_rank, int64_t vp_stage) {
  const model::PipelineChunk& chunk = split.chunk(pp_rank, vp_stage);
  model::ModelSpan span{{}, chunk.pre_process, chunk.post_process};
  for (int64_t layer : chunk.layers())
    if (auto hf = split.hf_layer(layer)) span.hf_layers.push_back(*hf);
  return span;
}

pipeline::PipelineSchedule pass_schedule(const model::PipelineSplit& split, const EngineConfig& config,
                                         int64_t num_microbatches, pipeline::PipelinePass pass) {
  const pipeline::ScheduleShape shape{.num_stages = split.pp_size,
                                      .num_chunks = split.vp_size,
                                      .num_microbatches = num_microbatches,
                                      .microbatch_group_size = config.microbatch_group_size_per_vp_stage.value_or(0),
                                      .pass = pass};
  try {
    return pipeline::make_pipeline_schedule(shape);
  } catch (const ConfigError& e) {
    // The count is the caller's (its micro-batch sizes): say so.
    throw ConfigError(e.key_path(),
                      fmt::format("{}: this pass has {} micro-batches per data-parallel rank, and the interleaved "
                                  "schedule (virtual_pipeline_model_parallel_size {}) needs at least "
                                  "pipeline_model_parallel_size = {}; give the pass smaller micro-batches",
                                  e.detail(), num_microbatches, split.vp_size, split.pp_size));
  }
}

std::vector<std::string> forward_output_keys(model::HeadKind head, model::EntropyOutput entropy) {
  if (head != model::HeadKind::lm) return {"values"};
  if (entropy == model::EntropyOutput::compute) return {"log_probs", "entropy"};
  return {"log_probs"};
}

void share_outputs_over_pipeline(dist::ProcessGroup& pipeline, const std::vector<std::string>& keys,
                                 const std::vector<TensorMap>& micro_batches, std::vector<TensorMap>& outputs) {
  const int last = pipeline.size() - 1;
  for (size_t i = 0; i < micro_batches.size(); ++i)
    for (const std::string& key : keys) {
      if (pipeline.rank() != last) outputs[i].set(key, Tensor({micro_batches[i].num_tokens()}, DType::f32));
      pipeline.broadcast(outputs[i].get(key), last);
    }
}

}  // namespace rf::engine
