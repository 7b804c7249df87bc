// tokenizer.json as a plain struct: the parts of Hugging Face's format that a byte-level BPE
// tokenizer (GPT-2, Llama-3, Qwen2, Qwen3) uses, parsed and validated. Everything this loader does not
// implement is refused here with an IoError naming the file and the key, never ignored: normalizers
// other than NFC, pre-tokenizers other than Split / ByteLevel / Sequence, models other than BPE (and
// BPE's byte_fallback, dropout, subword prefixes), post-processors other than ByteLevel /
// TemplateProcessing / Sequence, decoders other than ByteLevel, and truncation or padding settings.
// Not here: running any of it (normalizer.h, pre_tokenizer.h, added_tokens.h, bpe_model.h).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace rf::data {

enum class NormalizerKind : uint8_t { none, nfc };

// Hugging Face's SplitDelimiterBehavior: what becomes of a match (the delimiter) when splitting.
enum class SplitBehavior : uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous };
enum class PatternKind : uint8_t { literal, regex };

struct SplitStep {
  std::string pattern;
  PatternKind pattern_kind = PatternKind::regex;
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;  // the pattern matches the pieces to keep rather than the delimiters
  std::string key;      // "pre_tokenizer.pretokenizers[0]", for errors found later (a regex that does not compile)
};

struct ByteLevelStep {
  bool add_prefix_space = true;  // a space before every piece that does not start with one
  bool use_regex = true;         // split with GPT-2's regex first
};

using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep>;

// An entry of "added_tokens". Matched in the text before any other step (added_tokens.h).
struct AddedTokenSpec {
  int64_t id = 0;
  std::string content;
  bool single_word = false;  // only where no word character touches it
  bool lstrip = false;       // swallows the whitespace on its left
  bool rstrip = false;       // swallows the whitespace on its right
  bool normalized = true;    // matched in the normalized text rather than the raw text
  bool special = false;      // dropped by decode(SpecialTokens::skip)
};

struct BpeModelSpec {
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token (Llama-3)
};

// One piece of a TemplateProcessing "single" template: the encoded text, or a special token's ids.
struct TemplatePiece {
  enum class Kind : uint8_t { sequence, special_token };
  Kind kind = Kind::sequence;
  std::vector<int64_t> ids;  // the special token's ids; empty for the sequence
  std::string key;           // "post_processor.special_tokens[\"<bos>\"].ids", for errors found later
};

struct TokenizerJson {
  NormalizerKind normalizer = NormalizerKind::none;
  std::vector<PreTokenizerStep> pre_tokenizer;  // a Sequence flattened; empty: the text is one piece
  std::vector<AddedTokenSpec> added_tokens;
  BpeModelSpec model;
  // What encode(..., AddSpecialTokens::yes) produces around the text; nullopt: the ids unchanged
  // (no post-processor, or only ByteLevel, which changes offsets only).
  std::optional<std::vector<TemplatePiece>> single_template;
};

// `path` names the file in errors (an IoError "<path>: <key>: <what is wrong>"). An empty model.vocab
// is refused: every text would encode to no tokens.
TokenizerJson parse_tokenizer_json(const nlohmann::json& j, const std::string& path);

// tokenizer.json files reach tens of megabytes (Gemma's 33 MB); read_json_file refuses more than this.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t(1) << 28;

// The JSON document in `path`; IoError naming the file when it is missing, not a file (a device),
// larger than kMaxTokenizerFileBytes, or malformed.
nlohmann::json read_json_file(const std::string& path);

}  // namespace rf::data
