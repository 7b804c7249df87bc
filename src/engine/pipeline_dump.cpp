#include "engine/pipeline_dump.h"

#include "engine/pipeline/pipeline_schedule_table.h"

namespace rf::engine {

std::string dump_pipeline_schedule(const EngineConfig& megatron, int64_t num_hidden_layers, int64_t num_microbatches) {
  const model::PipelineSplit split = megatron.pipeline_layout(num_hidden_layers);
  const pipeline::PipelineSchedule schedule = pipeline::make_pipeline_schedule(
      {.num_stages = split.pp_size,
       .num_chunks = split.vp_size,
       .num_microbatches = num_microbatches,
       .microbatch_group_size = megatron.microbatch_group_size_per_vp_stage.value_or(0)});
  return split.describe() + "\n" + pipeline::format_schedule_table(schedule);
}

}  // namespace rf::engine
