// config.json's dimensions against the shapes its weights' safetensors headers declare, before a
// ParamLayout is built from them or a tensor is read: a num_hidden_layers of 1e9 over weights of 2 layers
// would otherwise build a layout of 1e10 entries and grow memory without end before the first missing
// tensor is noticed. Checked: the layer count, and the embedding's, layer 0's q/k projections' and MLP's
// shapes (vocab_size, hidden_size, heads x head_dim, kv heads x head_dim, intermediate_size). Every other
// tensor's shape is load_hf_weights' to check, against the layout these dimensions bound.
#pragma once

#include <string>

#include "formats/safetensors_folder.h"
#include "model/model_config.h"

namespace rf::model {

// ConfigError keyed by the dimension, naming the config file (config.source), the value and what the
// weights' file holds instead.
void check_dimensions_against_weights(const ModelConfig& config, const formats::SafetensorsFolder& weights);

}  // namespace rf::model
