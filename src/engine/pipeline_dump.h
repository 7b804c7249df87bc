// What `rlforge sft --dump-schedule M` and `rlforge train --dump-schedule M` print for an engine: its layer split
// over the pipeline, then every stage's action table (pipeline/pipeline_schedule_table.h) for M micro-batches per
// DP rank, as the engine would run them. M is the caller's: the commands check the counts their config fixes
// before a run (trainer/sft_parallel.h, rl/trainer/rl_layout.h), and the user names the count to look at.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_config.h"

namespace rf::engine {

// `split` is megatron.pipeline_layout()'s, checked by the caller. ConfigError keyed `key_prefix` + the block's key
// (megatron.microbatch_group_size_per_vp_stage) when the interleaved schedule does not take M micro-batches.
std::string dump_pipeline_schedule(const EngineConfig& megatron, const model::PipelineSplit& split,
                                   int64_t num_microbatches, const std::string& key_prefix);

}  // namespace rf::engine
