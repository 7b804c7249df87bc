#include "model/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "formats/json_input.h"
#include "model/rope_scaling.h"

namespace rf::model {
namespace {

// How an error shows a JSON value: nlohmann writes a non-finite float (which a YAML model.config can
// hold: config/yaml_json.h) as null.
std::string shown(const nlohmann::json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) return fmt::format("{}", value.get<double>());
  return value.dump();
}

[[noreturn]] void throw_unexpected(const char* key, const std::string& source, std::string_view expected,
                                   const nlohmann::json& value) {
  throw ConfigError(key, fmt::format("in {}: unexpected value {} (expected {})", source, shown(value), expected));
}

// Each type's reading is strict: nlohmann's get<int64_t>() would truncate 16.7 to 16, wrap 2^63, and
// convert 1e30 with undefined behaviour; get<bool>() of a number and get<double>() of a bool throw
// messages that name neither the key nor the file.
void read_value(const nlohmann::json& value, const std::string& source, const char* key, int64_t& out) {
  if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)))
    throw_unexpected(key, source, "an integer", value);
  out = value.get<int64_t>();
}
void read_value(const nlohmann::json& value, const std::string& source, const char* key, double& out) {
  if (!value.is_number() || !std::isfinite(value.get<double>())) throw_unexpected(key, source, "a finite number", value);
  out = value.get<double>();
}
void read_value(const nlohmann::json& value, const std::string& source, const char* key, bool& out) {
  if (!value.is_boolean()) throw_unexpected(key, source, "true or false", value);
  out = value.get<bool>();
}
void read_value(const nlohmann::json& value, const std::string& source, const char* key, std::string& out) {
  if (!value.is_string()) throw_unexpected(key, source, "a string", value);
  out = value.get<std::string>();
}

void read_value(const nlohmann::json& value, const std::string& source, const char* key, std::vector<int64_t>& out) {
  if (!value.is_array()) throw_unexpected(key, source, "a list of integers", value);
  out.assign(value.size(), 0);
  for (size_t i = 0; i < value.size(); ++i) read_value(value[i], source, key, out[i]);
}

// Reads `key` when present and not null; a wrong JSON type is a ConfigError naming the key.
template <class T>
void read_optional(const nlohmann::json& json, const std::string& source, const char* key, T& out) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return;
  read_value(*it, source, key, out);
}

template <class T>
void read_required(const nlohmann::json& json, const std::string& source, const char* key, T& out) {
  if (!json.contains(key) || json.at(key).is_null())
    throw ConfigError(key, fmt::format("missing from {}", source));
  read_optional(json, source, key, out);
}

// The suffixes of the HF classes rlforge reads, by head (HeadKind's order).
constexpr const char* kHeadSuffixes[] = {"ForCausalLM", "ForTokenClassification", "ForSequenceClassification"};
constexpr const char* kFamilyPrefixes[] = {"Llama", "Qwen2", "Qwen3", "Qwen2Moe", "Qwen3Moe"};  // Arch's order

// config.json's architectures[0], split into its family (when it is one rlforge knows) and its head.
struct ArchitectureClass {
  std::optional<Arch> family;
  HeadKind head = HeadKind::lm;
};

ArchitectureClass parse_architectures(const nlohmann::json& json, const std::string& source) {
  ArchitectureClass parsed;
  const auto it = json.find("architectures");
  if (it == json.end() || it->is_null() || (it->is_array() && it->empty())) return parsed;
  if (!it->is_array() || !(*it)[0].is_string())
    throw ConfigError("architectures",
                      fmt::format("in {}: expected a list of class names, got {}", source, it->dump()));
  const std::string name = (*it)[0].get<std::string>();
  for (size_t h = 0; h < std::size(kHeadSuffixes); ++h) {
    if (!name.ends_with(kHeadSuffixes[h])) continue;
    parsed.head = HeadKind(h);
    const std::string family = name.substr(0, name.size() - std::string_view(kHeadSuffixes[h]).size());
    for (size_t a = 0; a < std::size(kFamilyPrefixes); ++a)
      if (family == kFamilyPrefixes[a]) parsed.family = Arch(a);
    return parsed;
  }
  throw ConfigError("architectures", fmt::format("in {}: '{}' is not supported: expected a class ending in "
                                                 "ForCausalLM, ForTokenClassification or ForSequenceClassification",
                                                 source, name));
}

Arch parse_arch(const nlohmann::json& json, const std::string& source, const ArchitectureClass& architecture) {
  std::string model_type;
  read_optional(json, source, "model_type", model_type);
  if (model_type.empty() && architecture.family) return *architecture.family;
  if (model_type == "llama") return Arch::llama;
  if (model_type == "qwen2") return Arch::qwen2;
  if (model_type == "qwen3") return Arch::qwen3;
  if (model_type == "qwen2_moe") return Arch::qwen2_moe;
  if (model_type == "qwen3_moe") return Arch::qwen3_moe;
  throw ConfigError("model_type", fmt::format("in {}: unknown architecture '{}': expected llama, qwen2, qwen3, "
                                              "qwen2_moe or qwen3_moe",
                                              source, model_type));
}

// transformers' num_labels: len(id2label) when config.json has it, else its num_labels argument, else 2.
int64_t read_num_labels(const nlohmann::json& json, const std::string& source) {
  if (const auto it = json.find("id2label"); it != json.end() && !it->is_null()) {
    if (!it->is_object())
      throw ConfigError("id2label", fmt::format("in {}: expected an object of labels, got {}", source, it->dump()));
    return int64_t(it->size());
  }
  int64_t num_labels = 2;
  read_optional(json, source, "num_labels", num_labels);
  return num_labels;
}

// Qwen2-MoE's and Qwen3-MoE's expert fields (transformers' Qwen2MoeConfig / Qwen3MoeConfig defaults where absent).
MoeConfig read_moe(const nlohmann::json& json, const std::string& source, Arch arch) {
  MoeConfig moe;
  read_required(json, source, "num_experts", moe.num_experts);
  read_required(json, source, "num_experts_per_tok", moe.num_experts_per_tok);
  read_required(json, source, "moe_intermediate_size", moe.moe_intermediate_size);
  read_optional(json, source, "norm_topk_prob", moe.norm_topk_prob);
  read_optional(json, source, "decoder_sparse_step", moe.decoder_sparse_step);
  read_optional(json, source, "mlp_only_layers", moe.mlp_only_layers);
  read_optional(json, source, "router_aux_loss_coef", moe.router_aux_loss_coef);
  read_optional(json, source, "output_router_logits", moe.output_router_logits);
  if (arch == Arch::qwen2_moe) {
    read_required(json, source, "shared_expert_intermediate_size", moe.shared_expert_intermediate_size);
    moe.shared_expert_gate = moe.shared_expert_intermediate_size > 0;
  }
  return moe;
}

// The fields that change the maths and that rlforge does not implement, judged by their effective
// value: what is refused is a setting that would make the model compute something else, not the
// mere presence of a key (Qwen2.5 ships sliding_window: 32768 with use_sliding_window: false, and
// full attention is what transformers runs then).
void check_supported_maths(const nlohmann::json& json, const std::string& source) {
  std::string act = "silu";
  read_optional(json, source, "hidden_act", act);
  if (act != "silu" && act != "swish")  // transformers' ACT2FN maps both to SiLU
    throw ConfigError("hidden_act", fmt::format("in {}: '{}' is not supported: expected silu", source, act));
  bool mlp_bias = false;
  read_optional(json, source, "mlp_bias", mlp_bias);
  if (mlp_bias) throw ConfigError("mlp_bias", fmt::format("in {}: MLP biases are not supported", source));

  double partial_rotary_factor = 1.0;
  read_optional(json, source, "partial_rotary_factor", partial_rotary_factor);
  if (partial_rotary_factor != 1.0)
    throw ConfigError("partial_rotary_factor", fmt::format("in {}: {} is not supported: rotary embeddings cover the "
                                                           "whole head (1.0)",
                                                           source, partial_rotary_factor));

  // Sliding windows: Qwen2/Qwen3 window attention only when use_sliding_window is true and the window
  // is not null (an absent sliding_window is transformers' default, 4096); newer transformers also
  // write the per-layer result as layer_types.
  bool use_sliding_window = false;
  read_optional(json, source, "use_sliding_window", use_sliding_window);
  const auto window = json.find("sliding_window");
  if (use_sliding_window && (window == json.end() || !window->is_null()))
    throw ConfigError("use_sliding_window", fmt::format("in {}: true (sliding_window {}) is not supported: rlforge "
                                                        "runs full causal attention; set it to false",
                                                        source, window == json.end() ? "4096 by default" : window->dump()));
  if (auto it = json.find("layer_types"); it != json.end() && it->is_array())
    for (size_t l = 0; l < it->size(); ++l)
      if ((*it)[l] != "full_attention")
        throw ConfigError(fmt::format("layer_types[{}]", l),
                          fmt::format("in {}: {} is not supported: expected full_attention", source, (*it)[l].dump()));
}

}  // namespace

std::string head_name(HeadKind head) {
  switch (head) {
    case HeadKind::lm: return "lm";
    case HeadKind::value: return "value";
    case HeadKind::score: return "score";
  }
  return "?";
}

std::string architecture_name(Arch arch, HeadKind head) {
  return std::string(kFamilyPrefixes[int(arch)]) + kHeadSuffixes[int(head)];
}

void set_head_json(nlohmann::json& config_json, Arch arch, HeadKind head, int64_t num_labels) {
  config_json["architectures"] = {architecture_name(arch, head)};
  config_json.erase("num_labels");  // transformers keeps the count as id2label, never as num_labels
  if (head == HeadKind::lm) {
    config_json.erase("id2label");
    config_json.erase("label2id");
    return;
  }
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < num_labels; ++i) {
    const std::string label = fmt::format("LABEL_{}", i);
    id2label[std::to_string(i)] = label;
    label2id[label] = i;
  }
  config_json["id2label"] = std::move(id2label);
  config_json["label2id"] = std::move(label2id);
}

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
    case Arch::qwen2_moe: return "qwen2_moe";
    case Arch::qwen3_moe: return "qwen3_moe";
  }
  return "?";
}

ModelConfig ModelConfig::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw ConfigError("<root>", fmt::format("{} is not a JSON object", source));
  ModelConfig c;
  c.source = source;
  const ArchitectureClass architecture = parse_architectures(json, source);
  c.arch = parse_arch(json, source, architecture);
  c.head = architecture.head;
  if (c.head != HeadKind::lm) c.num_labels = read_num_labels(json, source);
  read_required(json, source, "vocab_size", c.vocab_size);
  read_required(json, source, "hidden_size", c.hidden_size);
  read_required(json, source, "intermediate_size", c.intermediate_size);
  read_required(json, source, "num_hidden_layers", c.num_hidden_layers);
  read_required(json, source, "num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = c.num_attention_heads;
  read_optional(json, source, "num_key_value_heads", c.num_key_value_heads);
  read_optional(json, source, "head_dim", c.head_dim);
  if (c.head_dim == 0 && c.num_attention_heads > 0) {
    // HF derives head_dim = hidden_size / num_attention_heads unless config.json states it (Qwen3
    // does, and it may differ from that quotient).
    if (c.hidden_size % c.num_attention_heads != 0)
      throw ConfigError("hidden_size", fmt::format("in {}: {} is not divisible by num_attention_heads={}", source,
                                                   c.hidden_size, c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  read_optional(json, source, "rms_norm_eps", c.rms_norm_eps);
  read_optional(json, source, "rope_theta", c.rope_theta);
  c.rope_scaling = parse_rope_scaling(json, source);
  read_optional(json, source, "max_position_embeddings", c.max_position_embeddings);
  read_optional(json, source, "tie_word_embeddings", c.tie_word_embeddings);
  read_optional(json, source, "initializer_range", c.initializer_range);
  read_optional(json, source, "torch_dtype", c.torch_dtype);
  // A list of ids (Llama-3.1's eos [128001, 128008, 128009]) is not read here: generation_config.json has it.
  for (const auto& [key, id] : {std::pair{"bos_token_id", &c.bos_token_id}, std::pair{"eos_token_id", &c.eos_token_id}})
    if (!json.contains(key) || !json.at(key).is_array()) read_optional(json, source, key, *id);
  c.attention_bias = c.arch == Arch::qwen2 || c.arch == Arch::qwen2_moe;
  if (c.arch == Arch::qwen2_moe) read_optional(json, source, "qkv_bias", c.attention_bias);
  if (c.arch == Arch::llama || c.arch == Arch::qwen3_moe) read_optional(json, source, "attention_bias", c.attention_bias);
  c.qk_norm = c.arch == Arch::qwen3 || c.arch == Arch::qwen3_moe;
  if (c.arch == Arch::qwen2_moe || c.arch == Arch::qwen3_moe) c.moe = read_moe(json, source, c.arch);

  check_supported_maths(json, source);
  c.validate();
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  return from_json(
      formats::parse_json_input(core::read_input_file(path, kMaxConfigJsonBytes, "a model's config.json"), path), path);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {
      {"model_type", arch_name(arch)},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
      {"hidden_act", "silu"},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_theta", rope_theta},
      {"rope_scaling", rope_scaling_json(rope_scaling)},
      {"max_position_embeddings", max_position_embeddings},
      {"tie_word_embeddings", tie_word_embeddings},
      {"initializer_range", initializer_range},
      {"torch_dtype", torch_dtype},
  };
  if (arch == Arch::llama || arch == Arch::qwen3_moe) j["attention_bias"] = attention_bias;
  if (arch == Arch::qwen2_moe) j["qkv_bias"] = attention_bias;
  if (moe.enabled()) {
    j["num_experts"] = moe.num_experts;
    j["num_experts_per_tok"] = moe.num_experts_per_tok;
    j["moe_intermediate_size"] = moe.moe_intermediate_size;
    j["norm_topk_prob"] = moe.norm_topk_prob;
    j["decoder_sparse_step"] = moe.decoder_sparse_step;
    j["mlp_only_layers"] = moe.mlp_only_layers;
    j["router_aux_loss_coef"] = moe.router_aux_loss_coef;
    j["output_router_logits"] = moe.output_router_logits;
    if (arch == Arch::qwen2_moe) j["shared_expert_intermediate_size"] = moe.shared_expert_intermediate_size;
  }
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  set_head_json(j, arch, head, num_labels);
  return j;
}

void ModelConfig::validate() const {
  auto size = [](const char* key, int64_t value, int64_t max) {
    if (value <= 0) throw ConfigError(key, fmt::format("must be positive, got {}", value));
    if (value > max) throw ConfigError(key, fmt::format("{} is more than the {} rlforge supports", value, max));
  };
  size("vocab_size", vocab_size, kMaxSize);
  size("hidden_size", hidden_size, kMaxSize);
  size("intermediate_size", intermediate_size, kMaxSize);
  size("num_hidden_layers", num_hidden_layers, kMaxLayers);
  size("num_attention_heads", num_attention_heads, kMaxSize);
  size("num_key_value_heads", num_key_value_heads, kMaxSize);
  size("head_dim", head_dim, kMaxSize);
  size("max_position_embeddings", max_position_embeddings, kMaxSize);
  if (num_attention_heads % num_key_value_heads != 0)
    throw ConfigError("num_key_value_heads", fmt::format("{} does not divide num_attention_heads={}",
                                                         num_key_value_heads, num_attention_heads));
  if (head_dim % 2 != 0) throw ConfigError("head_dim", fmt::format("must be even for rotary embeddings, got {}", head_dim));
  auto positive_finite = [](const char* key, double value) {
    if (!(value > 0) || !std::isfinite(value))
      throw ConfigError(key, fmt::format("must be a positive finite number, got {}", value));
  };
  positive_finite("rms_norm_eps", rms_norm_eps);
  positive_finite("rope_theta", rope_theta);
  if (!std::isfinite(initializer_range))
    throw ConfigError("initializer_range", fmt::format("must be finite, got {}", initializer_range));
  // In double, so that the check itself cannot overflow: every offset of the flat parameter buffer
  // (param_layout.h) then fits int64 with room to spare.
  const double C = double(hidden_size), HD = double(num_attention_heads) * double(head_dim),
               KD = double(num_key_value_heads) * double(head_dim), F = double(intermediate_size);
  const double experts = double(moe.num_experts) * 3 * C * double(moe.moe_intermediate_size) +
                         3 * C * double(moe.shared_expert_intermediate_size) + (double(moe.num_experts) + 1) * C;
  const double per_layer = C * (HD + 2 * KD) + HD * C + 3 * C * F + experts + 2 * C + 2 * (HD + KD);
  const double num_parameters = 2 * double(vocab_size) * C + double(num_hidden_layers) * per_layer + C;
  if (num_parameters > kMaxParameters)
    throw ConfigError("hidden_size", fmt::format("these sizes make about {:.3g} parameters, more than the {:.3g} "
                                                 "rlforge addresses",
                                                 num_parameters, kMaxParameters));
  if ((arch == Arch::qwen2_moe || arch == Arch::qwen3_moe) && !moe.enabled())
    throw ConfigError("num_experts", fmt::format("must be positive for {}, got {}", arch_name(arch), moe.num_experts));
  moe.validate(num_hidden_layers);
  if (head != HeadKind::lm && num_labels < 1)
    throw ConfigError("id2label", fmt::format("a {} head needs at least one label, got {}", head_name(head), num_labels));
}

std::string ModelConfig::describe() const {
  const std::string head_text =
      head == HeadKind::lm ? std::string() : fmt::format(", {} head of {} label(s)", head_name(head), num_labels);
  const std::string moe_text =
      moe.enabled() ? fmt::format(", {} experts top-{} of ffn {}{}", moe.num_experts, moe.num_experts_per_tok,
                                  moe.moe_intermediate_size,
                                  moe.shared_expert_intermediate_size > 0
                                      ? fmt::format(" + shared {}", moe.shared_expert_intermediate_size)
                                      : std::string())
                    : std::string();
  return fmt::format("{}: {} layers, hidden {}, {} heads ({} kv, head_dim {}), ffn {}{}, vocab {}, {} embeddings{}",
                     arch_name(arch), num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim,
                     intermediate_size, moe_text, vocab_size, tie_word_embeddings ? "tied" : "untied", head_text);
}

}  // namespace rf::model
