// ModelConfig: the architecture of a dense decoder, read from a Hugging Face `config.json`
// (model_type llama, qwen2, qwen3). Fields keep HF's names. `validate()` reports the first bad
// field as a ConfigError naming it (`num_key_value_heads: 3 does not divide num_attention_heads=8`).
// from_json also refuses fields that change the maths and that rlforge does not implement, judged by
// their effective value (use_sliding_window with a window, rope_scaling other than default, linear
// or llama3, hidden_act other than SiLU, ...; docs/models.md lists them). Fields it does not read are ignored
// here; HfModelFolder (hf_folder.h) keeps them for export.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "kernels/rope.h"

namespace rf::model {

enum class Arch : uint8_t { llama, qwen2, qwen3 };

struct ModelConfig {
  Arch arch = Arch::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // HF default: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  kernels::RopeScaling rope_scaling;  // config.json's rope_scaling (model/rope_scaling.h)
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases: always on for qwen2, `attention_bias` for llama
  bool qk_norm = false;         // per-head RMSNorm of q and k: qwen3
  double initializer_range = 0.02;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  std::string torch_dtype = "float32";

  // `source` names the file in error messages.
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source);
  static ModelConfig from_file(const std::string& path);
  nlohmann::json to_json() const;  // HF config.json fields

  void validate() const;  // throws ConfigError naming the field
  std::string describe() const;
};

std::string arch_name(Arch arch);

}  // namespace rf::model
