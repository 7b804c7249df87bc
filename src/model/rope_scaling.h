// config.json's `rope_scaling` <-> kernels::RopeScaling. null, a missing key, `rope_type: default`
// and `linear` / `llama3` with factor 1 (the identity) all mean no scaling; `linear` and `llama3`
// read the fields transformers reads for them (`factor`; llama3 also `low_freq_factor`,
// `high_freq_factor`, `original_max_position_embeddings`), each a ConfigError naming it
// (`rope_scaling.low_freq_factor`) when missing or not a positive number. Other types (dynamic,
// yarn, longrope, ...) change the attention maths in ways the kernels do not implement and are
// refused by name. Older files spell `rope_type` as `type`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/rope.h"

namespace rf::model {

// `source` names the file in errors.
kernels::RopeScaling parse_rope_scaling(const nlohmann::json& config_json, const std::string& source);

// The `rope_scaling` value transformers would write for `scaling` (null for none).
nlohmann::json rope_scaling_json(const kernels::RopeScaling& scaling);

}  // namespace rf::model
