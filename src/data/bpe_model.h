// BpeModel: tokenizer.json's "model" of type BPE. A word (one pre-tokenized piece) starts as one
// symbol per character and the adjacent pair with the lowest merge rank is merged until no pair has
// one, exactly as Hugging Face's Word::merge_all: a min-heap of (rank, position) over a linked list
// of symbols, stale entries skipped when popped. O(n log n) per word; words repeat, so results are
// cached (Hugging Face's policy: words under 256 bytes, until 10,000 are cached).
// Not here: dropout (training only), byte_fallback and subword prefixes/suffixes (tokenizer_json.cpp
// refuses them).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer_json.h"

namespace rf::data {

class BpeModel {
 public:
  // IoError naming `path` and the key when a merge or the unk_token is not in the vocabulary, or two
  // tokens share an id.
  BpeModel(const BpeModelSpec& spec, const std::string& path);
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of `word`. A character outside the vocabulary becomes unk_token when there is
  // one (consecutive ones fused with fuse_unk). Without one it is an IoError naming the file and the
  // character: Hugging Face drops the character silently, so the text the model sees would not be
  // the text given (a byte-level vocabulary holds all 256 byte characters, so only a broken one errs).
  void encode_word(std::string_view word, std::vector<int64_t>& ids) const;

  std::optional<int64_t> id_of(std::string_view token) const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  struct WordCache;

  std::vector<int32_t> merge_word(std::string_view word) const;
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and merged id
  // The ids of the one-character tokens below U+0180 (-1: none), which covers the byte-level alphabet:
  // a word's first step looks up every character, and a table beats hashing each one.
  std::array<int32_t, 0x180> id_of_small_char_;
  std::optional<int32_t> unk_id_;
  std::string path_;  // the tokenizer.json, for encode errors
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;  // behind a pointer: it holds a mutex, and a model must stay movable
};

}  // namespace rf::data
