#include "engine/pipeline_dump.h"

#include "core/error.h"
#include "engine/pipeline/pipeline_schedule_table.h"

namespace rf::engine {

std::string dump_pipeline_schedule(const EngineConfig& megatron, const model::PipelineSplit& split,
                                   int64_t num_microbatches, const std::string& key_prefix) {
  pipeline::PipelineSchedule schedule;
  try {
    schedule = pipeline::make_pipeline_schedule(megatron.schedule_shape(split, num_microbatches));
  } catch (const ConfigError& e) {
    throw ConfigError(key_prefix + e.key_path(), e.detail());
  }
  return split.describe() + "\n" + pipeline::format_schedule_table(schedule);
}

}  // namespace rf::engine
