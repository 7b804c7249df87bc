// ModelConfig: the architecture of a decoder, read from a Hugging Face `config.json`
// (model_type llama, qwen2, qwen3; qwen2_moe and qwen3_moe with their MoE fields in `moe`, moe_config.h).
// Fields keep HF's names. The head on the final hidden states comes from `architectures[0]`'s class (HeadKind below); a value or score head has `num_labels` outputs:
// transformers' len(id2label), else its `num_labels` argument, else 2 (transformers saves id2label only
// when it differs from that default). `validate()` reports the first bad
// field as a ConfigError naming it (`num_key_value_heads: 3 does not divide num_attention_heads=8`).
// from_json also refuses fields that change the maths and that rlforge does not implement, judged by
// their effective value (use_sliding_window with a window, rope_scaling other than default, linear
// or llama3, hidden_act other than SiLU, ...; docs/models.md lists them). Fields it does not read are ignored
// here; HfModelFolder (hf_folder.h) keeps them for export.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "kernels/rope.h"
#include "model/moe_config.h"

namespace rf::model {

enum class Arch : uint8_t { llama, qwen2, qwen3, qwen2_moe, qwen3_moe };

// What the model computes from its final hidden states, by the HF class name's suffix:
//   lm     <Family>ForCausalLM: the LM head (lm_head.weight, or the tied embedding): log-probs, entropy
//   value  <Family>ForTokenClassification: score.weight [num_labels, C] and score.bias [num_labels] on every
//          token, verl's critic (num_labels 1; HF's classifier dropout is not modelled: verl sets it to 0)
//   score  <Family>ForSequenceClassification: score.weight [num_labels, C] without bias, read at each
//          sequence's last token: a reward model. HF picks the rightmost token that is not pad_token_id;
//          rlforge, as verl's reward workers, takes each packed document's last token, so pad_token_id is
//          not read (the two agree unless a document ends in pad_token_id tokens).
// The value and score heads have no LM head: tie_word_embeddings has no effect there (HF ties nothing).
enum class HeadKind : uint8_t { lm, value, score };

struct ModelConfig {
  // Limits of validate(), far above any real model: sizes fit int32 (the kernels' row and column
  // counts), the layer loop stays short, and every parameter offset fits int64 with room to spare.
  static constexpr int64_t kMaxSize = INT32_MAX;
  static constexpr int64_t kMaxLayers = 4096;
  static constexpr double kMaxParameters = 0x1p50;  // 10^15
  // config.json is a few kilobytes; from_file refuses more than this before parsing.
  static constexpr uint64_t kMaxConfigJsonBytes = uint64_t(1) << 20;

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
  // q/k/v biases: always on for qwen2, `qkv_bias` (default on) for qwen2_moe, `attention_bias` for llama and qwen3_moe
  bool attention_bias = false;
  bool qk_norm = false;  // per-head RMSNorm of q and k: qwen3, qwen3_moe
  MoeConfig moe;         // qwen2_moe, qwen3_moe
  double initializer_range = 0.02;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  std::string torch_dtype = "float32";
  HeadKind head = HeadKind::lm;  // architectures[0]; lm when config.json names no class
  int64_t num_labels = 1;        // the value or score head's outputs (not read for lm)
  // Where the fields were read (from_json's `source`: a config.json path, or a config key such as
  // model.config), for errors about the model found later; not a field of config.json.
  std::string source;

  // `source` names the file in error messages. Every field read must have its JSON type (an integer
  // field refuses 16.7, 1e30 and 2^63) and doubles must be finite.
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source);
  static ModelConfig from_file(const std::string& path);
  nlohmann::json to_json() const;  // HF config.json fields (id2label and label2id for a value or score head)

  void validate() const;  // throws ConfigError naming the field
  std::string describe() const;
};

std::string arch_name(Arch arch);
std::string head_name(HeadKind head);  // "lm", "value", "score"
// The HF class of a model: LlamaForCausalLM, Qwen2ForTokenClassification, Qwen3ForSequenceClassification, ...
std::string architecture_name(Arch arch, HeadKind head);
// config.json's head fields for `head`: architectures, and id2label / label2id with num_labels labels
// (LABEL_0, ... as transformers names them) for a value or score head, removed for lm.
void set_head_json(nlohmann::json& config_json, Arch arch, HeadKind head, int64_t num_labels);

}  // namespace rf::model
