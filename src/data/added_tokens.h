// AddedTokenMatcher: cuts the added tokens of tokenizer.json ("<|im_start|>", "<think>", ...) out
// of a text before normalization and BPE, as Hugging Face's AddedVocabulary::find_matches does:
// leftmost-longest matching of the tokens' contents, a single_word token only where no word
// character (Rust regex `\w`) touches it, lstrip / rstrip swallowing the whitespace beside the token.
// A tokenizer uses two matchers: the tokens with normalized=false on the raw text, then those with
// normalized=true on each normalized piece (their contents normalized the same way).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "data/tokenizer_json.h"
#include "data/unicode_regex.h"

namespace rf::data {

// A piece of text after the added tokens are cut out: text still to tokenize, or one added token.
struct TextPiece {
  std::string_view text;
  std::optional<int64_t> token_id;
};

class AddedTokenMatcher {
 public:
  // Tokens with empty content never match (Hugging Face ignores them too).
  explicit AddedTokenMatcher(std::vector<AddedTokenSpec> tokens);

  // Appends the pieces of valid UTF-8 `text` in order; empty text pieces are left out.
  void split(std::string_view text, std::vector<TextPiece>& pieces) const;

 private:
  struct Match {
    size_t token;  // index into tokens_
    size_t start, end;
  };
  std::optional<Match> find_leftmost_longest(std::string_view text, size_t from) const;
  bool is_word_char_at(std::string_view text, size_t pos) const;

  std::vector<AddedTokenSpec> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into tokens_, longest content first
  UnicodeRegex word_char_;                                // one character of Rust regex's Unicode `\w`
};

}  // namespace rf::data
