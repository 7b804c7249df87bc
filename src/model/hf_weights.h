// Loads a Hugging Face model folder's weights (model.safetensors, or the shards listed in
// model.safetensors.index.json) into a ParamStore, converting to its dtype. Every parameter of the
// layout must be present with its exact shape; an unexpected tensor is an error (it would mean the
// config and the weights disagree), except buffers HF itself ignores (rotary inv_freq), a tied model's
// redundant lm_head.weight and, for a pipeline stage's layout, the other stages' tensors. Errors name the file
// and the tensor.
#pragma once

#include <string>

#include "model/param_store.h"

namespace rf::model {

void load_hf_weights(const ParamStore& params, const std::string& model_dir);

// A model on another model's backbone (verl's critic on the actor's LM folder: a value head where the
// folder has lm_head): the embedding, decoder layers and final norm come from the folder as above; the
// folder's head tensors (lm_head.weight, score.*) are ignored; this model's head is drawn fresh, as HF
// initialises a head the checkpoint lacks (init_param: N(0, initializer_range) weights, zero bias), from
// `seed`.
void load_hf_backbone(const ParamStore& params, const ModelConfig& config, const std::string& model_dir,
                      uint64_t seed);

}  // namespace rf::model
