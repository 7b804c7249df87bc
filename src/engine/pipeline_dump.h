// What `rlforge sft --dump-schedule M` and `rlforge train --dump-schedule M` print for an engine: its layer split
// over the pipeline, then every stage's action table (pipeline/pipeline_schedule_table.h) for M micro-batches per
// DP rank, as the engine would run them. M is the caller's: a step's micro-batch count depends on the data (SFT
// packs to a token budget, RL's dynamic batch size by tokens), so the user names the count to look at.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_config.h"

namespace rf::engine {

// ConfigError naming the key when the split does not fit the model or the interleaved schedule does not take M
// micro-batches (microbatch_group_size_per_vp_stage).
std::string dump_pipeline_schedule(const EngineConfig& megatron, int64_t num_hidden_layers, int64_t num_microbatches);

}  // namespace rf::engine
