#include "model/weights_dimensions.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "core/error.h"
#include "model/param_layout.h"

namespace rf::model {
namespace {

// The layer index of "model.layers.<i>.<rest>", nullopt for any other name.
std::optional<int64_t> layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  int64_t layer = -1;
  const char* begin = name.data() + kPrefix.size();
  const auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
  if (ec != std::errc() || end == begin || *end != '.' || layer < 0) return std::nullopt;
  return layer;
}

}  // namespace

void check_dimensions_against_weights(const ModelConfig& config, const formats::SafetensorsFolder& weights) {
  int64_t num_layers = 0;
  for (const std::string& name : weights.names())
    if (const std::optional<int64_t> layer = layer_of(name)) num_layers = std::max(num_layers, *layer + 1);
  if (config.num_hidden_layers != num_layers)
    throw ConfigError("num_hidden_layers",
                      fmt::format("{} in {}, but the weights in {} hold {}", config.num_hidden_layers, config.source,
                                  weights.dir(),
                                  num_layers == 0 ? std::string("no layer")
                                                  : fmt::format("{} (model.layers.0 to model.layers.{})", num_layers,
                                                                num_layers - 1)));
  // `tensor`'s dimension `dim` is `expected`, which config.json says as `stated` under `key`.
  auto check = [&](const char* tensor, int dim, const char* key, int64_t expected, const std::string& stated) {
    if (!weights.contains(tensor)) return;  // a missing tensor is load_hf_weights' error to name
    const Shape& shape = weights.entry(tensor).shape;
    if (shape.rank() == 2 && shape[dim] == expected) return;
    throw ConfigError(key, fmt::format("{} in {}, but {} holds {} of shape {}", stated, config.source,
                                       weights.file_of(tensor).path(), tensor, shape.to_string()));
  };
  const auto plain = [](int64_t value) { return std::to_string(value); };
  const auto heads = [&](int64_t count) {
    return fmt::format("{} (x head_dim {} = {} rows)", count, config.head_dim, count * config.head_dim);
  };
  check("model.embed_tokens.weight", 0, "vocab_size", config.vocab_size, plain(config.vocab_size));
  check("model.embed_tokens.weight", 1, "hidden_size", config.hidden_size, plain(config.hidden_size));
  check("model.layers.0.self_attn.q_proj.weight", 0, "num_attention_heads",
        config.num_attention_heads * config.head_dim, heads(config.num_attention_heads));
  check("model.layers.0.self_attn.k_proj.weight", 0, "num_key_value_heads",
        config.num_key_value_heads * config.head_dim, heads(config.num_key_value_heads));
  const MoeConfig& moe = config.moe;
  int64_t first_dense = 0, first_moe = -1;
  while (first_dense < config.num_hidden_layers && moe.is_moe_layer(first_dense)) ++first_dense;
  for (int64_t l = config.num_hidden_layers; l-- > 0;)
    if (moe.is_moe_layer(l)) first_moe = l;
  const std::string dense = layer_param_name(first_dense, "mlp.gate_proj.weight");
  check(dense.c_str(), 0, "intermediate_size", config.intermediate_size, plain(config.intermediate_size));
  if (first_moe < 0) return;
  const std::string router = layer_param_name(first_moe, "mlp.gate.weight");
  check(router.c_str(), 0, "num_experts", moe.num_experts, plain(moe.num_experts));
  const std::string expert = expert_param_name(first_moe, 0, "gate_proj");
  check(expert.c_str(), 0, "moe_intermediate_size", moe.moe_intermediate_size, plain(moe.moe_intermediate_size));
  if (moe.shared_expert_intermediate_size == 0) return;
  const std::string shared = layer_param_name(first_moe, "mlp.shared_expert.gate_proj.weight");
  check(shared.c_str(), 0, "shared_expert_intermediate_size", moe.shared_expert_intermediate_size,
        plain(moe.shared_expert_intermediate_size));
}

}  // namespace rf::model
