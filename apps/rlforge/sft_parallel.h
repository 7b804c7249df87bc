// How `rlforge sft` runs on several ranks: the parallel layout of its megatron config over the
// world, and each data-parallel rank's share of a step's examples.
#pragma once

#include <vector>

#include "data/task.h"
#include "dist/parallel_context.h"
#include "engine/engine_config.h"

namespace rf::apps {

// The engine's groups: TP (and SP) as config.megatron says, DP whatever is left of the world. A world
// of one is the single-process context. ConfigError naming the key for a layout that does not fit.
dist::ParallelContext make_parallel_context(const engine::EngineConfig& megatron, dist::ProcessGroup& world);

// Every rank draws the same global batch (one seeded stream, so the batch and its order do not depend
// on the layout); DP rank r trains on the contiguous r-th 1/DP of it, its TP ranks on the same part.
// ConfigError naming data.train_batch_size when DP does not divide it.
std::vector<data::Example> dp_share(std::vector<data::Example> global_batch, const dist::ProcessGroup& dp);

}  // namespace rf::apps
