// The whole weights of a model whose ranks each hold a part: this rank's TP shard of its pipeline stage's
// parameters (model/param_layout.h). Each weight is gathered over TP on the stage that holds it and, with PP,
// broadcast from that stage to every stage, so every rank sees every weight whole, in the whole model's HF
// order. What the hybrid engine's weight sync and every HF export read.
#pragma once

#include <functional>
#include <string>

#include "dist/parallel_context.h"
#include "model/param_store.h"

namespace rf::engine {

using WeightSink = std::function<void(const std::string& hf_name, TensorView full)>;

// Collective over the TP and pipeline groups of `parallel`. `stage` holds this rank's part of a model of
// `config`, laid out for its TP rank; one gathered tensor is alive at a time (at TP 1 and PP 1 the sink reads
// the store itself).
void for_each_whole_weight(const model::ParamStore& stage, const model::ModelConfig& config,
                           const dist::ParallelContext& parallel, const WeightSink& sink);

}  // namespace rf::engine
