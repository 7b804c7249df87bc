// BpeTokenizer: a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama-3, Qwen2,
// Qwen3), giving the ids and decodes of Hugging Face's own (Rust) tokenizers library. encode() runs
// HF's pipeline: added tokens cut out of the raw text (added_tokens.h), NFC on the rest
// (normalizer.h), the added tokens marked normalized cut out of that, pre-tokenization into words
// (pre_tokenizer.h), BPE merges per word (bpe_model.h), and with AddSpecialTokens::yes the
// TemplateProcessing post-processor. decode() maps each token back to bytes through the byte-level
// alphabet (byte_level.h) and ends, as HF's ByteLevel decoder, with a lossy UTF-8 conversion.
// Deliberate differences from HF: invalid UTF-8 given to encode(), a character the vocabulary has no
// token for (without an unk_token), and ids outside the vocabulary given to decode() are errors (HF's
// Rust API cannot receive the first and silently drops the other two). A tokenizer.json whose ids are
// mostly unused (the largest id over twice the number of tokens, plus kIdSlack) is refused at load, as
// is a template whose special-token ids are not tokens: they would reach the model as ids of nothing.
// encode() and decode() may be called from several threads at once (the word cache is locked).
// What tokenizer.json features are supported: tokenizer_json.h. Chat templates: chat_template.h.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe_model.h"
#include "data/pre_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_config.h"
#include "data/tokenizer_json.h"

namespace rf::data {

class BpeTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kIdSlack = 1024;

  // `path`: a folder with tokenizer.json (and tokenizer_config.json, read when present), or a
  // tokenizer.json file alone. IoError naming the file and key for anything missing, malformed or unsupported.
  static BpeTokenizer load(const std::string& path);
  // The tokenizer of folder `dir` whose tokenizer.json the caller has already parsed (load_tokenizer.h
  // looks at its model type first); reads tokenizer_config.json when present.
  static BpeTokenizer from_folder(const std::string& dir, const nlohmann::json& tokenizer_json);
  // From a parsed tokenizer.json; `source` names it in errors.
  BpeTokenizer(const nlohmann::json& tokenizer_json, const std::string& source, TokenizerConfig config);

  using Tokenizer::encode;
  // `text` must be valid UTF-8: rf::Error naming the first bad byte's offset otherwise.
  std::vector<int64_t> encode(std::string_view text, AddSpecialTokens add_special_tokens) const override;
  std::string decode(std::span<const int64_t> ids, SpecialTokens specials) const override;
  // One past the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const override { return int64_t(bytes_of_id_.size()); }
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  std::optional<int64_t> pad_id() const override { return pad_id_; }
  std::optional<int64_t> special_token_id(std::string_view content) const override;

  const TokenizerConfig& config() const { return config_; }

 private:
  BpeTokenizer(TokenizerJson spec, const std::string& source, TokenizerConfig config);
  void encode_text(std::string_view text, std::vector<int64_t>& ids) const;

  enum class IdKind : uint8_t { unused, ordinary, special };
  NormalizerKind normalizer_;
  AddedTokenMatcher raw_tokens_;         // added tokens with normalized=false, matched on the raw text
  AddedTokenMatcher normalized_tokens_;  // normalized=true, matched on the normalized text
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  std::optional<std::vector<TemplatePiece>> single_template_;
  std::vector<std::string> bytes_of_id_;  // what decode() emits for each id
  std::vector<IdKind> kind_of_id_;
  std::map<std::string, int64_t, std::less<>> special_ids_;  // special added tokens by content
  std::string source_;  // the tokenizer.json, for errors
  std::optional<int64_t> bos_id_, eos_id_, pad_id_;
  TokenizerConfig config_;
};

}  // namespace rf::data
