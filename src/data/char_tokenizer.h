// CharTokenizer: the built-in tokenizer for the built-in tasks. Ids 0, 1, 2 are the special tokens
// <pad>, <bos>, <eos>; then one id per character of a fixed alphabet of printable ASCII characters,
// in alphabet order. save() writes a Hugging Face tokenizer folder that the `tokenizers` library and
// transformers' PreTrainedTokenizerFast load and that encodes and decodes identically: a WordLevel
// model over single characters, a Split pre-tokenizer on the regex "." (one piece per character),
// the specials as added tokens, and a Fuse decoder (pieces joined without spaces). No post-processor:
// like encode() here, Hugging Face's encode() then adds no bos/eos. Its unk_token "<unk>" is
// deliberately absent from the vocabulary, so an unknown character is an error there as it is here.
// Not here: other tokenizer.json kinds (byte-level BPE: bpe_tokenizer.h).
#pragma once

#include <array>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "data/tokenizer.h"

namespace rf::data {

class CharTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kPadId = 0, kBosId = 1, kEosId = 2;
  static constexpr int64_t kNumSpecialTokens = 3;
  static constexpr std::array<std::string_view, 3> kSpecialTokens = {"<pad>", "<bos>", "<eos>"};

  // `alphabet`: distinct printable ASCII characters (0x20..0x7e); rf::Error otherwise.
  explicit CharTokenizer(std::string alphabet);
  // The alphabet of a built-in task (task.h); ConfigError at `data.task` for an unknown name.
  static CharTokenizer for_task(const std::string& task_name);

  // Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dir` (created if
  // needed), each atomically (temp file, fsync, rename). IoError naming the file on failure.
  // tokenizer.json, tokenizer_config.json and special_tokens_map.json (file name -> contents).
  std::map<std::string, std::string> hf_files(int64_t model_max_length) const;
  void save(const std::string& dir, int64_t model_max_length) const;
  // Reads `dir`/tokenizer.json as save() writes it. Any other kind of tokenizer.json is an IoError
  // naming the file.
  static CharTokenizer load(const std::string& dir);
  // From a parsed tokenizer.json; `path` names it in errors.
  static CharTokenizer from_json(const nlohmann::json& tokenizer_json, const std::string& path);

  const std::string& alphabet() const { return alphabet_; }

  using Tokenizer::encode;
  // `add_special_tokens` changes nothing: the Hugging Face files save() writes have no post-processor.
  std::vector<int64_t> encode(std::string_view text, AddSpecialTokens add_special_tokens) const override;
  std::string decode(std::span<const int64_t> ids, SpecialTokens specials) const override;
  int64_t vocab_size() const override { return kNumSpecialTokens + int64_t(alphabet_.size()); }
  std::optional<int64_t> bos_id() const override { return kBosId; }
  std::optional<int64_t> eos_id() const override { return kEosId; }
  std::optional<int64_t> pad_id() const override { return kPadId; }
  std::optional<int64_t> special_token_id(std::string_view content) const override;

 private:
  std::string alphabet_;
  std::array<int64_t, 128> id_of_char_{};  // -1 for characters outside the alphabet
};

}  // namespace rf::data
