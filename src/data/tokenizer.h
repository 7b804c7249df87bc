// Tokenizer: the interface the data pipeline, the rollout and the apps use to turn text into token ids
// and back. Two implementations: the built-in CharTokenizer (char_tokenizer.h) and the Hugging Face
// byte-level BPE tokenizer.json loader (bpe_tokenizer.h). Chat templates are not here: they turn
// messages into text before encode() (chat_template.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rf::data {

// What decode() does with special-token ids: render their text ("<eos>"), as Hugging Face's
// decode(skip_special_tokens=False) does, or drop them.
enum class SpecialTokens : uint8_t { keep, skip };
// Whether encode() applies the tokenizer's post-processor, as Hugging Face's add_special_tokens:
// Llama-3's TemplateProcessing prepends <|begin_of_text|>; Qwen's adds nothing either way.
enum class AddSpecialTokens : uint8_t { no, yes };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. Special-token text inside `text` ("<eos>") becomes that token's id, as in Hugging Face.
  virtual std::vector<int64_t> encode(std::string_view text, AddSpecialTokens add_special_tokens) const = 0;
  // encode(text, AddSpecialTokens::no): the data pipeline places bos/eos itself.
  std::vector<int64_t> encode(std::string_view text) const { return encode(text, AddSpecialTokens::no); }
  // Ids -> text; an id outside [0, vocab_size()) is an rf::Error naming it and its position.
  virtual std::string decode(std::span<const int64_t> ids, SpecialTokens specials) const = 0;

  virtual int64_t vocab_size() const = 0;
  // Hugging Face tokenizers may lack any of these (Qwen has no bos, Llama no pad): nullopt then.
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;
  virtual std::optional<int64_t> pad_id() const = 0;
  // The id of the special token whose text is `content` ("<eos>"), or nullopt if there is none.
  virtual std::optional<int64_t> special_token_id(std::string_view content) const = 0;
};

}  // namespace rf::data
