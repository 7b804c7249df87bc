// PreTokenizer: splits a normalized piece of text into the words the BPE model sees, running the
// steps of tokenizer.json's pre_tokenizer in order as Hugging Face does: Split (a regex or a literal,
// with one of the five delimiter behaviours, optionally inverted) and ByteLevel (a prefix space,
// GPT-2's regex, then every byte as its byte-level character). Empty pieces are dropped after each
// step. Words stream out as they are found: nothing the size of the text is built on the way.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer_json.h"
#include "data/unicode_regex.h"

namespace rf::data {

class PreTokenizer {
 public:
  using WordSink = std::function<void(std::string_view word)>;

  // IoError naming `path` and the step's key when a regex cannot be used (unicode_regex.h).
  PreTokenizer(const std::vector<PreTokenizerStep>& steps, const std::string& path);

  // Calls on_word for each word of valid UTF-8 `text`, in order.
  void split(std::string_view text, const WordSink& on_word) const;

 private:
  struct Split {
    UnicodeRegex regex;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    bool use_regex;
  };
  struct Step {
    std::optional<Split> split;           // set for a Split step
    std::optional<ByteLevel> byte_level;  // set for a ByteLevel step
  };
  // Runs steps_[step..] on `piece`.
  void apply(size_t step, std::string_view piece, const WordSink& on_word) const;

  std::vector<Step> steps_;
  std::optional<UnicodeRegex> gpt2_regex_;  // compiled when a ByteLevel step uses it
};

}  // namespace rf::data
