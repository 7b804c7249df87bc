// tokenizer_config.json: what transformers keeps beside tokenizer.json and a BPE tokenizer needs
// here: the bos / eos / pad token texts, the chat template, and add_bos_token. Every other key is
// ignored (model_max_length, clean_up_tokenization_spaces, ...: they change nothing in encode/decode).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

namespace rf::data {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token;
  std::optional<std::string> chat_template;  // the "default" one when the file lists several
  std::optional<bool> add_bos_token;
  std::string path;  // the file it came from ("" when there was none), for errors that concern it
};

// `path` names the file in errors (an IoError "<path>: <key>: <what is wrong>").
TokenizerConfig parse_tokenizer_config(const nlohmann::json& j, const std::string& path);
TokenizerConfig read_tokenizer_config(const std::string& path);

}  // namespace rf::data
