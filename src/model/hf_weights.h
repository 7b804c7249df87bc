// Loads a Hugging Face model folder's weights (model.safetensors, or the shards listed in
// model.safetensors.index.json) into a ParamStore, converting to its dtype. Every parameter of the
// layout must be present with its exact shape; an unexpected tensor is an error (it would mean the
// config and the weights disagree), except buffers HF itself ignores (rotary inv_freq) and a
// tied model's redundant lm_head.weight. Errors name the file and the tensor.
#pragma once

#include <string>

#include "model/param_store.h"

namespace rf::model {

void load_hf_weights(const ParamStore& params, const std::string& model_dir);

}  // namespace rf::model
