// A small byte-level BPE tokenizer for new models (`rlforge init-model`), in the Hugging Face format
// of the family it goes with, so that src/data's BpeTokenizer, transformers and `tokenizers` load it:
//   qwen2 / qwen3  Qwen2's pre-tokenizer (its Split regex, then ByteLevel), NFC, specials
//                  <|endoftext|> <|im_start|> <|im_end|> (eos <|im_end|>, pad <|endoftext|>, no bos),
//                  a ChatML chat template
//   llama          Llama-3's pre-tokenizer, ignore_merges, specials <|begin_of_text|> <|end_of_text|>
//                  <|start_header_id|> <|end_header_id|> <|eot_id|>, a post-processor that prepends
//                  <|begin_of_text|>, Llama-3's chat template
// Ids 0..255 are the 256 bytes (GPT-2's byte-level alphabet, in byte order), then the merged tokens
// in merge order, then the specials. The merges are learned from a built-in English / arithmetic /
// code corpus by plain BPE (the most frequent adjacent pair of the pre-tokenized corpus, ties to the
// smallest pair in byte order, until the id budget is spent or every word is one token), so the result is
// a pure function of (family, vocab budget): the same bytes on every machine.
// Not here: training on user data, SentencePiece-style tokenizers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace rf::apps {

struct BuiltTokenizer {
  std::map<std::string, std::string> files;  // tokenizer.json, tokenizer_config.json, special_tokens_map.json
  int64_t num_ids = 0;                       // one past the largest id
  std::optional<int64_t> bos_id;             // what config.json calls bos_token_id
  int64_t eos_id = 0;                        // the chat turn's end: config.json's eos_token_id
  std::vector<int64_t> generation_eos_ids;   // generation_config.json's eos_token_id
  std::optional<int64_t> pad_id;
};

// The number of special tokens of `arch`'s family; a vocabulary needs at least 256 + this many ids.
int64_t num_special_tokens(model::Arch arch);

// A tokenizer of at most `max_ids` ids (>= 256 + num_special_tokens(arch): rf::Error otherwise).
// `model_max_length` goes into tokenizer_config.json.
BuiltTokenizer build_byte_level_tokenizer(model::Arch arch, int64_t max_ids, int64_t model_max_length);

}  // namespace rf::apps
