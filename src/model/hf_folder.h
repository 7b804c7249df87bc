// HfModelFolder: a Hugging Face model folder (Llama, Qwen2 or Qwen3 ForCausalLM, ForTokenClassification
// or ForSequenceClassification: model_config.h's HeadKind) as rlforge imports and exports it:
//   config.json  kept whole as JSON. ModelConfig reads the fields the model uses (and refuses maths
//                rlforge does not implement, judged by effective value: model_config.cpp); every other
//                field is carried through and written back unchanged.
//   weights      model.safetensors, or shards listed by model.safetensors.index.json, by HF name. Their
//                values go through a ParamStore (hf_weights.h loads it); the stored dtype of each
//                tensor, the files' __metadata__ ({"format": "pt"}) and the split into files (which
//                tensor in which file, the index's metadata) are remembered here, so an export writes
//                them back as they came. A tied model has no lm_head.weight, as HF saves it.
//   side files   generation_config.json and the tokenizer files (kHfSideFiles): copied byte for byte.
// Import then export is bit-exact: the same tensors in the same dtypes (f32, bf16 and f16 values pass
// through an f32 ParamStore unchanged) in the same files, the same config.json and side files.
// config.json is written as transformers writes it (json.dumps(indent=2, sort_keys=True) + "\n") and
// the safetensors writer matches Hugging Face's, so a folder transformers saved comes back byte for
// byte, shards and index included.
// Not here: loading weight values (hf_weights.h), tokenizers (src/data), native checkpoints
// (engine/hf_checkpoint.h converts between the two).
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors_folder.h"
#include "model/model_config.h"
#include "model/param_store.h"

namespace rf::model {

// The files beside config.json and the weights that travel with a model, verbatim.
inline constexpr std::array<const char*, 8> kHfSideFiles = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json",      "vocab.json",     "merges.txt",            "chat_template.jinja"};

// save_pretrained's default max_shard_size, "5GB".
inline constexpr size_t kDefaultMaxShardBytes = 5'000'000'000;

struct HfModelFolder {
  nlohmann::json config_json;                          // config.json, every field
  ModelConfig config;                                  // what the model uses, read from config_json
  std::map<std::string, DType> weight_dtypes;          // stored dtype of each parameter, by HF name
  std::map<std::string, std::string> weight_metadata;  // the weight files' __metadata__
  std::map<std::string, std::string> side_files;       // file name -> contents
  std::optional<formats::SafetensorsSplit> weight_split;  // the weight files as read; nullopt: a new model

  // Reads config.json, the side files present and the weights' headers (no tensor data). IoError or
  // ConfigError naming the file (and the key or tensor) for anything missing, malformed or unsupported;
  // config.json's dimensions are checked against the headers' shapes first (weights_dimensions.h).
  static HfModelFolder open(const std::string& dir);
  // A new model: config_json = config.to_json() with torch_dtype, every weight in `dtype`, no side files.
  static HfModelFolder for_config(const ModelConfig& config, DType dtype);

  // A dtype that holds every stored weight exactly: f64 if one is f64, else f32.
  DType exact_store_dtype() const;
  // Every weight of `config` stored in `dtype` from now on: weight_dtypes, config.json's torch_dtype
  // (and dtype, which transformers >= 4.56 writes instead) and config.torch_dtype. When that changes
  // some weight's dtype, weight_split is dropped: the sizes its files were chosen for no longer hold.
  void set_dtype(DType dtype);
  // The same backbone under another head (a critic's folder from the actor's: HeadKind::value, one
  // label): config.head and num_labels, config.json's architectures, id2label and label2id
  // (set_head_json), the old head's weights gone and the new head's stored in the final norm's dtype.
  // weight_split is dropped: its files list the old head's tensors.
  void set_head(HeadKind head, int64_t num_labels);
};

struct HfExportOptions {
  std::optional<DType> dtype;             // every weight in this dtype; nullopt: each in its stored dtype
  std::optional<size_t> max_shard_bytes;  // shard by size; nullopt: see write_hf_folder
};

// Writes `dir` (created if missing): the weights of `params` (laid out for folder.config) by HF name;
// the side files; then config.json, last, so a folder interrupted mid-way has none and does not look
// like a model. options.dtype acts as folder.set_dtype. Weights holding a NaN or Inf are refused (IoError
// naming `dir` and the tensor) before anything is written. Every file is written atomically. Returns the
// file names written. How the weights are split into files:
//   options.max_shard_bytes set   by size, huggingface_hub's rule (safetensors_folder_writer.h);
//   else folder.weight_split      when it still describes the weights: it lists exactly the tensors
//                                 written and each keeps its stored dtype. The same files under the
//                                 same names and the same index (metadata kept whole), so a sharded
//                                 folder comes back byte for byte, whatever split its saver chose;
//   else                          by size with kDefaultMaxShardBytes, as save_pretrained.
std::vector<std::string> write_hf_folder(const std::string& dir, const HfModelFolder& folder,
                                         const ParamStore& params, const HfExportOptions& options = {});

// Where generation stops, as transformers' generate takes it: generation_config.json's eos_token_id (a
// number or a list), else config.json's; empty when neither names one. `dir` names the files in errors
// (IoError when eos_token_id is not a token id or a list of them).
std::vector<int64_t> generation_eos_ids(const HfModelFolder& folder, const std::string& dir);

// config.json's text as transformers writes it: json.dumps(indent=2, sort_keys=True) + "\n".
std::string hf_config_text(const nlohmann::json& config_json);

// The name config.json's torch_dtype uses ("float32", "bfloat16", "float16", "float64"), and back
// (nullopt for a name that is none of those).
std::string torch_dtype_name(DType dtype);
std::optional<DType> dtype_from_torch_name(const std::string& name);

// Reads a whole file; IoError naming it when it cannot be read.
std::string read_file_bytes(const std::string& path);

}  // namespace rf::model
