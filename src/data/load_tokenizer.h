// load_tokenizer: the tokenizer of a folder holding a tokenizer.json, of whichever kind it is, for
// callers that accept both (`rlforge sft`'s model.tokenizer). The kind is read from tokenizer.json's
// model type: WordLevel is the built-in character tokenizer's format (CharTokenizer::save writes it,
// CharTokenizer::load checks the rest), BPE the Hugging Face byte-level kind (BpeTokenizer).
// Not here: `builtin:<task>` names (CharTokenizer::for_task), choosing a tokenizer for a model.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace rf::data {

// IoError naming `dir`/tokenizer.json when it is missing, malformed, or of another model type.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace rf::data
