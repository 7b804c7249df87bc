// How `rlforge sft` runs on several ranks: the parallel layout of its megatron config over the
// world, checked whole before the run starts, and each data-parallel rank's share of a step's examples.
#pragma once

#include <vector>

#include "trainer/sft_config.h"
#include "data/task.h"
#include "dist/parallel_context.h"
#include "engine/engine_config.h"
#include "model/pipeline_split.h"

namespace rf::trainer {

// The layout of `config` on `world_size` ranks, from the config alone: the megatron sizes against the
// world (RankLayout's rules), TP against the model's heads, kv heads and FFN and, when any pipeline key is
// set (EngineConfig::splits_layers), the layer split against its layers (model.path's config.json or
// model.config), DP against data.train_batch_size, and an interleaved pipeline's schedule against the
// micro-batches of a step (num_microbatches_per_step). Every rank reaches the same verdict without talking
// to the others, so a wrong layout fails on all of them alike, before the run folder, the tokenizer, the
// data or the model. ConfigError keyed by the path the user wrote (megatron.tensor_model_parallel_size).
// EngineConfig::validate (run when the config is read) has already refused sizes < 1, SP without TP, VPP
// without PP, a layout string that does not parse and the axes not supported yet.
void check_parallel_layout(const SftConfig& config, int world_size);

// The model's layers over the pipeline, without the world (`--dump-schedule` prints it): ConfigError keyed
// megatron.<key>, naming the model it read ("... in model.config").
model::PipelineSplit pipeline_split(const SftConfig& config);

// The micro-batches of one optimizer step on each of `num_dp_ranks` data-parallel ranks: the rank's share of
// data.train_batch_size cut into groups of data.micro_batch_size_per_gpu examples, each group packed into one
// micro-batch (an example holds at most max_length tokens, a micro-batch micro_batch_size_per_gpu x max_length),
// so the count does not depend on the data.
int64_t num_microbatches_per_step(const data::DataConfig& data, int64_t num_dp_ranks);

// Every rank draws the same global batch (one seeded stream, so the batch and its order do not depend
// on the layout); DP rank r trains on the contiguous r-th 1/DP of it, its TP ranks on the same part.
// ConfigError naming data.train_batch_size when DP does not divide it.
std::vector<data::Example> dp_share(std::vector<data::Example> global_batch, const dist::ProcessGroup& dp);

}  // namespace rf::trainer
