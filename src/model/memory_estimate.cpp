#include "model/memory_estimate.h"

#include <fmt/format.h>

#include <array>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace rf::model {
namespace {

// A byte count of any size: format_bytes's units up to TiB, then powers of ten.
std::string shown_bytes(double bytes) {
  return bytes < 0x1p50 ? format_bytes(int64_t(bytes)) : fmt::format("{:.3g} bytes", bytes);
}

// What each tensor of a model costs beyond its values: its ParamEntry, HF name and index entry in every
// ParamLayout, store and plan built from it, its map entries in an HfModelFolder, its safetensors header
// line. Measured at 1.3 KiB (SFT up to the engine) and 2 KiB (init-model) per tensor on models of 20,000 and
// 50,000 layers of width 2; 1 KiB stays below both.
constexpr double kBytesPerLayoutEntry = 1024.0;

double layout_entries(const ModelConfig& c) {
  const double per_layer = 9.0 + (c.attention_bias ? 3.0 : 0.0) + (c.qk_norm ? 2.0 : 0.0);
  // An MoE layer has its router and E experts' three projections (and the shared expert's) for the MLP's three.
  const double per_moe_layer = 1.0 + 3.0 * double(c.moe.num_experts) - 3.0 +
                               (c.moe.shared_expert_intermediate_size > 0 ? 3.0 : 0.0) +
                               (c.moe.shared_expert_gate ? 1.0 : 0.0);
  double moe_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers && c.moe.enabled(); ++l) moe_layers += c.moe.is_moe_layer(l) ? 1 : 0;
  return double(c.num_hidden_layers) * per_layer + moe_layers * per_moe_layer + 3.0;  // embedding, final norm, head
}

// The dimension of `config` furthest above the largest released dense decoders' (Llama 3.1 405B's width,
// depth and heads, Gemma 3's vocabulary and head_dim): the likeliest typo when a model does not fit.
// head_dim is a suspect only when it is not hidden_size / num_attention_heads (HF's default, which follows
// those two).
std::pair<const char*, int64_t> most_outsized_dimension(const ModelConfig& c) {
  const bool own_head_dim = c.head_dim * c.num_attention_heads != c.hidden_size;
  const std::array<std::tuple<const char*, int64_t, double>, 8> dims = {{
      {"num_hidden_layers", c.num_hidden_layers, 126},
      {"hidden_size", c.hidden_size, 16384},
      {"intermediate_size", c.intermediate_size, 53248},
      {"vocab_size", c.vocab_size, 262144},
      {"num_attention_heads", c.num_attention_heads, 128},
      {"num_key_value_heads", c.num_key_value_heads, 128},
      {"head_dim", own_head_dim ? c.head_dim : 0, 256},
      {"num_labels", c.head == HeadKind::lm ? 0 : c.num_labels, 1000},
  }};
  std::pair<const char*, int64_t> worst = {"num_hidden_layers", c.num_hidden_layers};
  double worst_ratio = -1;
  for (const auto& [key, value, largest] : dims)
    if (double(value) / largest > worst_ratio) {
      worst_ratio = double(value) / largest;
      worst = {key, value};
    }
  return worst;
}

}  // namespace

std::string MemoryEstimate::describe() const {
  std::string terms;
  for (const auto& [name, bytes] : {std::pair{"params", params}, std::pair{"grads", grads},
                                    std::pair{"optimizer", optimizer}, std::pair{"activations", activations},
                                    std::pair{"layout", layout}})
    if (bytes > 0) terms += fmt::format("{}{} {}", terms.empty() ? "" : ", ", name, shown_bytes(bytes));
  return fmt::format("{} ({})", shown_bytes(total()), terms);
}

double count_parameters(const ModelConfig& c) {
  const double C = double(c.hidden_size), V = double(c.vocab_size), F = double(c.intermediate_size);
  const double HD = double(c.num_attention_heads) * double(c.head_dim);
  const double KD = double(c.num_key_value_heads) * double(c.head_dim);
  double layer = 2 * C + HD * C + 2 * KD * C + C * HD;  // norms, q, k, v, o
  if (c.attention_bias) layer += HD + 2 * KD;
  if (c.qk_norm) layer += 2 * double(c.head_dim);
  double ffn = 0;  // every layer's gate, up and down: a dense MLP's or an MoE layer's router, experts, shared expert
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    ffn += c.moe.is_moe_layer(l) ? double(c.moe.num_experts) * C +
                                       3 * C * double(c.moe.num_experts * c.moe.moe_intermediate_size +
                                                      c.moe.shared_expert_intermediate_size) +
                                       (c.moe.shared_expert_gate ? C : 0)
                                 : 3 * F * C;
  double head = 0;
  switch (c.head) {
    case HeadKind::lm: head = c.tie_word_embeddings ? 0 : V * C; break;
    case HeadKind::value: head = double(c.num_labels) * (C + 1); break;
    case HeadKind::score: head = double(c.num_labels) * C; break;
  }
  return V * C + double(c.num_hidden_layers) * layer + ffn + C + head;
}

MemoryEstimate weights_memory(const ModelConfig& config, DType dtype) {
  MemoryEstimate estimate;
  estimate.params = count_parameters(config) * double(dtype_size(dtype));
  estimate.layout = layout_entries(config) * kBytesPerLayoutEntry;
  return estimate;
}

void require_fits(const ModelConfig& config, const MemoryEstimate& estimate, const MemoryBudget& budget,
                  std::string_view purpose) {
  if (estimate.total() <= double(budget.bytes)) return;
  const auto [key, value] = most_outsized_dimension(config);
  throw ConfigError(key, fmt::format("{} in {}: the model ({}) needs at least {} to {}, more than the {} of {}",
                                     value, config.source.empty() ? "the model config" : config.source,
                                     config.describe(), estimate.describe(), purpose, shown_bytes(double(budget.bytes)),
                                     budget.source));
}

}  // namespace rf::model
