#include "model/rope_scaling.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace rf::model {
namespace {

// rope_scaling.<key> as a positive finite number (a YAML model.config can hold an infinity).
double positive_field(const nlohmann::json& scaling, const char* key, const std::string& source) {
  const auto it = scaling.find(key);
  if (it == scaling.end() || !it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
    throw ConfigError(fmt::format("rope_scaling.{}", key),
                      fmt::format("in {}: expected a positive finite number, got {}", source,
                                  it == scaling.end()        ? std::string("nothing")
                                  : it->is_number_float() ? fmt::format("{}", it->get<double>())
                                                          : it->dump()));
  return it->get<double>();
}

}  // namespace

kernels::RopeScaling parse_rope_scaling(const nlohmann::json& config_json, const std::string& source) {
  using kernels::RopeScalingType;
  const auto it = config_json.find("rope_scaling");
  if (it == config_json.end() || it->is_null()) return {};
  if (!it->is_object())
    throw ConfigError("rope_scaling", fmt::format("in {}: expected null or an object, got {}", source, it->dump()));
  const char* type_key = it->contains("rope_type") ? "rope_type" : "type";
  const nlohmann::json type_json = it->value(type_key, nlohmann::json());
  if (!type_json.is_string())
    throw ConfigError("rope_scaling.rope_type", fmt::format("in {}: expected a string in {}", source, it->dump()));
  const std::string type = type_json.get<std::string>();
  kernels::RopeScaling scaling;
  if (type == "default") return scaling;
  if (type != "linear" && type != "llama3")
    throw ConfigError("rope_scaling.rope_type", fmt::format("in {}: '{}' is not supported: expected default, linear "
                                                            "or llama3",
                                                            source, type));
  scaling.factor = positive_field(*it, "factor", source);
  if (type == "linear") {
    scaling.type = RopeScalingType::linear;
  } else {
    scaling.type = RopeScalingType::llama3;
    scaling.low_freq_factor = positive_field(*it, "low_freq_factor", source);
    scaling.high_freq_factor = positive_field(*it, "high_freq_factor", source);
    scaling.original_max_position_embeddings = positive_field(*it, "original_max_position_embeddings", source);
    if (!(scaling.high_freq_factor > scaling.low_freq_factor))
      throw ConfigError("rope_scaling.high_freq_factor",
                        fmt::format("in {}: {} must exceed low_freq_factor {}", source, scaling.high_freq_factor,
                                    scaling.low_freq_factor));
  }
  // Factor 1 is the identity for both types (llama3 blends inv_freq / 1 with inv_freq).
  if (scaling.factor == 1.0) return {};
  return scaling;
}

nlohmann::json rope_scaling_json(const kernels::RopeScaling& scaling) {
  using kernels::RopeScalingType;
  switch (scaling.type) {
    case RopeScalingType::none: return nullptr;
    case RopeScalingType::linear: return {{"rope_type", "linear"}, {"factor", scaling.factor}};
    case RopeScalingType::llama3:
      return {{"rope_type", "llama3"},
              {"factor", scaling.factor},
              {"low_freq_factor", scaling.low_freq_factor},
              {"high_freq_factor", scaling.high_freq_factor},
              {"original_max_position_embeddings", scaling.original_max_position_embeddings}};
  }
  return nullptr;
}

}  // namespace rf::model
