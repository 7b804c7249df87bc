// ParamLayout: every parameter of a model by its Hugging Face name, with its shape and its offset
// in one flat buffer. ParamStore (weights) and GradBuffer (gradients) share a layout, so a
// parameter and its gradient sit at the same offset, and DP can reduce the whole buffer (or
// buckets of it) in one call.
// Order: embedding, then per layer input_layernorm, q/k/v (+ biases, q_norm/k_norm), o_proj,
// post_attention_layernorm, gate/up (adjacent: a fused [2F, C] GEMM can view them as one), down;
// then the final norm and lm_head (absent when tied). Offsets are padded to 64 bytes.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/shape.h"
#include "model/model_config.h"

namespace rf::model {

struct ParamEntry {
  std::string name;  // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
  int64_t offset = 0;  // in elements
};

class ParamLayout {
 public:
  static ParamLayout for_model(const ModelConfig& config);

  void add(std::string name, Shape shape);
  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry& entry(const std::string& name) const;  // throws naming the parameter
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  int64_t total_numel() const { return total_numel_; }   // including alignment padding
  int64_t num_parameters() const;                         // excluding padding

 private:
  std::vector<ParamEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_numel_ = 0;
};

// HF names of one decoder layer's parameters.
std::string layer_param_name(int64_t layer, const char* suffix);

}  // namespace rf::model
