// An engine's parallel groups from its config: the megatron block's sizes laid out over the ranks of the
// role that runs it (TP fastest, DP whatever is left: dist/rank_layout.h). Every trainer (SFT, each role of
// an RL run) builds its contexts here.
#pragma once

#include "dist/parallel_context.h"
#include "dist/rank_layout.h"
#include "engine/engine_config.h"

namespace rf::engine {

// The sizes of `megatron` on `world_size` ranks, unchecked (RankLayout checks them).
dist::ParallelDims parallel_dims(const EngineConfig& megatron, int world_size);

// The engine's groups: TP (and SP) as `megatron` says, DP whatever is left of `world`. A world of one is
// the single-process context. ConfigError naming the key for a layout that does not fit.
dist::ParallelContext make_parallel_context(const EngineConfig& megatron, dist::ProcessGroup& world);

}  // namespace rf::engine
