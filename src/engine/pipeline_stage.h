// What one pipeline rank of an engine holds and runs, shared by the training engine and the forward-only
// engine (InferEngine): the layer split over the engine's pipeline group, the stage's parts and chunk spans,
// the pass's schedule (with the micro-batch count named when interleaving refuses it), and the last stage's
// forward outputs handed to every stage.
// Not here: running a schedule (pipeline/pipeline_executor.h), the schedules themselves, losses.
#pragma once

#include <string>
#include <vector>

#include "dist/parallel_context.h"
#include "engine/engine_config.h"
#include "engine/pipeline/pipeline_schedule.h"
#include "engine/tensor_map.h"
#include "model/causal_lm.h"
#include "model/param_layout.h"
#include "model/pipeline_split.h"

namespace rf::engine {

// The layer split over the engine's pipeline group, checked against its size.
// Also checks the CP size and cp_comm_type against the group and the model (check_context_parallel): both engines
// split the layers first, before allocating.
model::PipelineSplit pipeline_split_of(const EngineConfig& config, const model::ModelConfig& model_config,
                                       const dist::ParallelContext& parallel);

// What stage `pp_rank` holds: its chunks' real layers, the embedding with the pipeline's first chunk, the head
// with its last.
// ConfigError naming cp_comm_type: a2a with heads (per TP rank) that do not divide by the CP size.
void check_context_parallel(const EngineConfig& config, const model::ModelConfig& model_config);
// expert_model_parallel_size (or moe_tp_extend_ep): a model with MoE layers whose expert count the EP ranks divide.
void check_expert_parallel(const EngineConfig& config, const model::ModelConfig& model_config);
// sequence_parallel: on for an MoE model trained at TP > 1 (forward-only passes run without it).
void check_moe_training(const EngineConfig& config, const model::ModelConfig& model_config);

model::StageParts stage_parts(const model::PipelineSplit& split, int64_t pp_rank);

// Chunk `vp_stage` of stage `pp_rank`: its real layers, and whether it reads the data or ends in the head.
model::ModelSpan chunk_span(const model::PipelineSplit& split, int64_t pp_rank, int64_t vp_stage);

// The schedule of a pass of `num_microbatches` per data-parallel rank. An interleaved schedule with fewer
// micro-batches than stages is a ConfigError that says the pass's count (Megatron refuses the same).
pipeline::PipelineSchedule pass_schedule(const model::PipelineSplit& split, const EngineConfig& config,
                                         int64_t num_microbatches, pipeline::PipelinePass pass);

// The outputs a forward-only pass returns per micro-batch: an LM's "log_probs" (and "entropy" when asked), a
// value or score model's "values".
std::vector<std::string> forward_output_keys(model::HeadKind head, model::EntropyOutput entropy);

// Hands the last stage's `outputs` (per micro-batch, f32 [N] under each of `keys`) to every stage of `pipeline`:
// the other stages' entries are made here. Collective over `pipeline`.
void share_outputs_over_pipeline(dist::ProcessGroup& pipeline, const std::vector<std::string>& keys,
                                 const std::vector<TensorMap>& micro_batches, std::vector<TensorMap>& outputs);

}  // namespace rf::engine
