#include "model/param_layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::model {
namespace {

constexpr int64_t kAlignElements = 32;  // 64 bytes of bf16; 128 of f32

}  // namespace

std::string layer_param_name(int64_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

void ParamLayout::add(std::string name, Shape shape) {
  RF_CHECK(!contains(name), "parameter {} added twice", name);
  index_.emplace(name, entries_.size());
  entries_.push_back({std::move(name), shape, total_numel_});
  total_numel_ += (shape.numel() + kAlignElements - 1) / kAlignElements * kAlignElements;
}

const ParamEntry& ParamLayout::entry(const std::string& name) const {
  auto it = index_.find(name);
  RF_CHECK(it != index_.end(), "no parameter named {}", name);
  return entries_[it->second];
}

int64_t ParamLayout::num_parameters() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += e.shape.numel();
  return n;
}

ParamLayout ParamLayout::for_model(const ModelConfig& c) {
  ParamLayout layout;
  const int64_t C = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
  const int64_t HD = c.num_attention_heads * c.head_dim, KD = c.num_key_value_heads * c.head_dim;
  layout.add("model.embed_tokens.weight", {V, C});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    layout.add(layer_param_name(l, "input_layernorm.weight"), {C});
    layout.add(layer_param_name(l, "self_attn.q_proj.weight"), {HD, C});
    layout.add(layer_param_name(l, "self_attn.k_proj.weight"), {KD, C});
    layout.add(layer_param_name(l, "self_attn.v_proj.weight"), {KD, C});
    if (c.attention_bias) {
      layout.add(layer_param_name(l, "self_attn.q_proj.bias"), {HD});
      layout.add(layer_param_name(l, "self_attn.k_proj.bias"), {KD});
      layout.add(layer_param_name(l, "self_attn.v_proj.bias"), {KD});
    }
    if (c.qk_norm) {
      layout.add(layer_param_name(l, "self_attn.q_norm.weight"), {c.head_dim});
      layout.add(layer_param_name(l, "self_attn.k_norm.weight"), {c.head_dim});
    }
    layout.add(layer_param_name(l, "self_attn.o_proj.weight"), {C, HD});
    layout.add(layer_param_name(l, "post_attention_layernorm.weight"), {C});
    layout.add(layer_param_name(l, "mlp.gate_proj.weight"), {F, C});
    layout.add(layer_param_name(l, "mlp.up_proj.weight"), {F, C});
    layout.add(layer_param_name(l, "mlp.down_proj.weight"), {C, F});
  }
  layout.add("model.norm.weight", {C});
  if (!c.tie_word_embeddings) layout.add("lm_head.weight", {V, C});
  return layout;
}

}  // namespace rf::model
