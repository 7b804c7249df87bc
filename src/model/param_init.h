// Fresh weights for a new model, as HF's `_init_weights` does for these architectures: linear and
// embedding weights ~ N(0, initializer_range), RMSNorm gains 1, biases 0. Every tensor draws from
// its own Philox stream (its index in the whole model's layout: ParamEntry::stream), so the result depends
// only on (seed, model), not on the TP or pipeline layout.
#pragma once

#include "model/model_config.h"
#include "model/param_store.h"

namespace rf::model {

void init_params(const ParamStore& params, const ModelConfig& config, uint64_t seed);
// One tensor, the layout's entry `index`, as init_params draws it (HF's initialisation of a head the
// checkpoint does not have: load_hf_backbone).
void init_param(const ParamStore& params, const ModelConfig& config, size_t index, uint64_t seed);

}  // namespace rf::model
