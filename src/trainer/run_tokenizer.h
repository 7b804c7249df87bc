// How `rlforge sft` turns text into token ids, resolved from model.tokenizer, model.path and data.task:
//   model.tokenizer null   model.path's own tokenizer.json when that folder has one, else builtin:<data.task>
//   builtin:<task>         the built-in character tokenizer of that task (data/char_tokenizer.h)
//   a folder               its tokenizer.json: the character tokenizer's format or Hugging Face
//                          byte-level BPE (data/load_tokenizer.h)
// Each example is framed [bos] prompt response eos (data/sft_batch.h). bos is the tokenizer's (Qwen's
// have none; Llama-3's <|begin_of_text|>). eos is the tokenizer's eos_token when the model's generation
// stops at it, else the first of the model's stop ids that the tokenizer has. The stop ids are
// model.path's as transformers' generate (and `rlforge generate`) take them: generation_config.json's
// eos_token_id, else config.json's; a new model has none, so its eos is the tokenizer's. A model
// trained here thus ends its answers where generation stops. Generation (evaluation, the RL rollout)
// stops at every stop id: those, eos, and the tokenizer's eos_token (vLLM stops there too).
// Refused as ConfigErrors naming the keys: a tokenizer other than model.path's own when that folder has
// one (its embeddings, and the tokenizer an export carries, mean that tokenizer's ids), no eos to end
// responses with, and (check_tokenizer_fits, once the model's config is known) ids beyond its vocab_size.
// Not here: chat templates (SFT's JSONL prompts are plain text: data/jsonl_dataset.h; RL's are rendered
// by rl_prompt_source.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainer/sft_config.h"
#include "data/sft_batch.h"
#include "data/tokenizer.h"
#include "model/hf_folder.h"

namespace rf::trainer {

struct RunTokenizer {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string name;  // "builtin:arith" or the folder, for messages
  data::SftSpecialIds special_ids;
  std::vector<int64_t> stop_ids;  // generation stops at any of these; special_ids.eos is one
  // The tokenizer files a Hugging Face export carries (file name -> contents), when they are not
  // model.path's own (empty then: the folder's side files already hold them).
  std::map<std::string, std::string> hf_files;
};

// `source` is model.path's folder when that is set. `data.max_length` goes into the files of a
// built-in tokenizer (model_max_length).
RunTokenizer make_run_tokenizer(const ModelSection& model, const data::DataConfig& data,
                                const model::HfModelFolder* source);

// ConfigError naming model.tokenizer and where `config` came from when the tokenizer has more ids than
// the model's vocab_size, or bos / eos is not a row of its embedding.
void check_tokenizer_fits(const RunTokenizer& tokens, const ModelSection& model, const model::ModelConfig& config);

}  // namespace rf::trainer
