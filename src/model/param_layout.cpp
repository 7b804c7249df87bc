#include "model/param_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace rf::model {
namespace {

constexpr int64_t kAlignElements = 32;  // 64 bytes of bf16; 128 of f32

}  // namespace

std::string layer_param_name(int64_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::string expert_param_name(int64_t layer, int64_t expert, const char* proj) {
  return fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", layer, expert, proj);
}

int64_t ParamEntry::real_extent() const {
  if (split == TpSplit::replicated) return shape[0];
  const int dim = split == TpSplit::rows ? 0 : 1;
  return std::clamp<int64_t>(hf_shape[dim] - shard_start, 0, shape[dim]);
}

TensorView ParamEntry::hf_part(const TensorView& hf_tensor) const {
  if (split == TpSplit::replicated) return hf_tensor;
  const int dim = split == TpSplit::rows ? 0 : 1;
  // A shard wholly in the vocab padding holds nothing of the tensor: an empty slice at its end.
  return hf_tensor.slice(dim, std::min(shard_start, hf_shape[dim]), real_extent());
}

TensorView ParamEntry::local_part(const TensorView& shard) const {
  if (split == TpSplit::replicated) return shard;
  return shard.slice(split == TpSplit::rows ? 0 : 1, 0, real_extent());
}

void ParamLayout::add(std::string name, Shape hf_shape, TpSplit split, int64_t padded_extent, bool packed) {
  RF_CHECK(!contains(name), "parameter {} added twice", name);
  Shape shape = hf_shape;
  int64_t shard_start = 0;
  if (split != TpSplit::replicated) {
    const int dim = split == TpSplit::rows ? 0 : 1;
    const int64_t extent = padded_extent != 0 ? padded_extent : hf_shape[dim];
    RF_CHECK(extent % tp_.size == 0, "parameter {}: dim {} of {} does not split over {} TP ranks", name, dim, extent,
             tp_.size);
    shape[dim] = extent / tp_.size;
    shard_start = tp_.rank * shape[dim];
  }
  const int64_t offset =
      packed && !entries_.empty() ? entries_.back().offset + entries_.back().shape.numel() : total_numel_;
  index_.emplace(name, entries_.size());
  entries_.push_back({std::move(name), shape, offset, hf_shape, split, shard_start});
  total_numel_ = (offset + shape.numel() + kAlignElements - 1) / kAlignElements * kAlignElements;
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

int64_t padded_vocab_size(int64_t vocab_size, const TensorParallelShard& tp) {
  if (tp.size == 1) return vocab_size;
  const int64_t multiple = tp.vocab_multiple * tp.size;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

void check_tp_divides(const ModelConfig& c, const TensorParallelShard& tp) {
  const std::pair<const char*, int64_t> split_evenly[] = {
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"intermediate_size", c.intermediate_size},
      {"shared_expert_intermediate_size", c.moe.shared_expert_intermediate_size}};
  for (const auto& [key, value] : split_evenly)
    if (value % tp.size != 0)
      throw ConfigError("tensor_model_parallel_size", fmt::format("{} does not divide {} = {}", tp.size, key, value));
  if (c.moe.enabled() && c.moe.moe_intermediate_size % tp.expert_size() != 0)
    throw ConfigError("expert_tensor_parallel_size",
                      fmt::format("{} does not divide moe_intermediate_size = {} (set it to 1: whole experts on every "
                                  "TP rank)",
                                  tp.expert_size(), c.moe.moe_intermediate_size));
}

StageParts StageParts::whole(const ModelConfig& c) {
  StageParts parts;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) parts.hf_layers.push_back(l);
  return parts;
}

ParamLayout ParamLayout::for_model(const ModelConfig& c, const TensorParallelShard& tp) {
  return for_stage(c, tp, StageParts::whole(c));
}

ParamLayout ParamLayout::for_stage(const ModelConfig& c, const TensorParallelShard& tp, const StageParts& stage) {
  RF_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size, "TP rank {} of {}", tp.rank, tp.size);
  RF_CHECK(tp.vocab_multiple >= 1, "make_vocab_size_divisible_by must be >= 1, got {}", tp.vocab_multiple);
  check_tp_divides(c, tp);
  ParamLayout layout;
  layout.tp_ = tp;
  layout.padded_vocab_ = model::padded_vocab_size(c.vocab_size, tp);
  const int64_t C = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
  const int64_t HD = c.num_attention_heads * c.head_dim, KD = c.num_key_value_heads * c.head_dim;
  constexpr TpSplit rows = TpSplit::rows, columns = TpSplit::columns;
  const bool tied_copy = stage.head && !stage.embedding && c.head == HeadKind::lm && c.tie_word_embeddings;
  // Every parameter of the whole model is visited in its order, to number its stream; the stage adds its own.
  int64_t stream = 0;
  auto param = [&](bool held, std::string name, Shape hf_shape, TpSplit split = TpSplit::replicated,
                   int64_t padded_extent = 0, bool packed = false) {
    layout.model_names_.insert(name);
    if (held) {
      layout.add(std::move(name), hf_shape, split, padded_extent, packed);
      layout.entries_.back().stream = stream;
    }
    ++stream;
  };
  param(stage.embedding || tied_copy, "model.embed_tokens.weight", {V, C}, rows, layout.padded_vocab_);
  if (tied_copy) layout.entries_.back().pipeline_copy = true;
  size_t next = 0;  // the next of the stage's layers
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool held = next < stage.hf_layers.size() && stage.hf_layers[next] == l;
    if (held) ++next;
    param(held, layer_param_name(l, "input_layernorm.weight"), {C});
    param(held, layer_param_name(l, "self_attn.q_proj.weight"), {HD, C}, rows);
    param(held, layer_param_name(l, "self_attn.k_proj.weight"), {KD, C}, rows);
    param(held, layer_param_name(l, "self_attn.v_proj.weight"), {KD, C}, rows);
    if (c.attention_bias) {
      param(held, layer_param_name(l, "self_attn.q_proj.bias"), {HD}, rows);
      param(held, layer_param_name(l, "self_attn.k_proj.bias"), {KD}, rows);
      param(held, layer_param_name(l, "self_attn.v_proj.bias"), {KD}, rows);
    }
    if (c.qk_norm) {
      param(held, layer_param_name(l, "self_attn.q_norm.weight"), {c.head_dim});
      param(held, layer_param_name(l, "self_attn.k_norm.weight"), {c.head_dim});
    }
    param(held, layer_param_name(l, "self_attn.o_proj.weight"), {C, HD}, columns);
    param(held, layer_param_name(l, "post_attention_layernorm.weight"), {C});
    if (!c.moe.is_moe_layer(l)) {
      param(held, layer_param_name(l, "mlp.gate_proj.weight"), {F, C}, rows);
      param(held, layer_param_name(l, "mlp.up_proj.weight"), {F, C}, rows);
      param(held, layer_param_name(l, "mlp.down_proj.weight"), {C, F}, columns);
      continue;
    }
    const int64_t E = c.moe.num_experts, FE = c.moe.moe_intermediate_size;
    param(held, layer_param_name(l, "mlp.gate.weight"), {E, C});
    const TpSplit expert_rows = tp.split_experts ? rows : TpSplit::replicated;
    const TpSplit expert_columns = tp.split_experts ? columns : TpSplit::replicated;
    for (const auto& [proj, shape, split] : {std::tuple{"gate_proj", Shape{FE, C}, expert_rows},
                                             std::tuple{"up_proj", Shape{FE, C}, expert_rows},
                                             std::tuple{"down_proj", Shape{C, FE}, expert_columns}})
      for (int64_t e = 0; e < E; ++e) param(held, expert_param_name(l, e, proj), shape, split, 0, e > 0);
    if (const int64_t FS = c.moe.shared_expert_intermediate_size; FS > 0) {
      param(held, layer_param_name(l, "mlp.shared_expert.gate_proj.weight"), {FS, C}, rows);
      param(held, layer_param_name(l, "mlp.shared_expert.up_proj.weight"), {FS, C}, rows);
      param(held, layer_param_name(l, "mlp.shared_expert.down_proj.weight"), {C, FS}, columns);
    }
    if (c.moe.shared_expert_gate) param(held, layer_param_name(l, "mlp.shared_expert_gate.weight"), {1, C});
  }
  RF_CHECK(next == stage.hf_layers.size(), "pipeline stage: its layers must be ascending HF indices below {}",
           c.num_hidden_layers);
  param(stage.head, "model.norm.weight", {C});
  switch (c.head) {
    case HeadKind::lm:
      if (!c.tie_word_embeddings) param(stage.head, "lm_head.weight", {V, C}, rows, layout.padded_vocab_);
      break;
    case HeadKind::value:
      param(stage.head, "score.weight", {c.num_labels, C});
      param(stage.head, "score.bias", {c.num_labels});  // HF's token classifier is an nn.Linear with bias
      break;
    case HeadKind::score:
      param(stage.head, "score.weight", {c.num_labels, C});  // bias=False in HF's sequence classifier
      break;
  }
  return layout;
}

}  // namespace rf::model
