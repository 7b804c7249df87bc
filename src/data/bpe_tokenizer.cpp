#include "data/bpe_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/log.h"
#include "data/byte_level.h"
#include "data/normalizer.h"
#include "data/utf8.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;

std::vector<AddedTokenSpec> added_tokens_where(const TokenizerJson& spec, bool normalized) {
  std::vector<AddedTokenSpec> tokens;
  for (const AddedTokenSpec& t : spec.added_tokens) {
    if (t.normalized != normalized) continue;
    tokens.push_back(t);
    // Hugging Face matches these in the normalized text, so it normalizes their contents too.
    if (normalized && spec.normalizer == NormalizerKind::nfc) tokens.back().content = normalize_nfc(t.content);
  }
  return tokens;
}

}  // namespace

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error))
    throw IoError(path, "no such folder or file (expected a folder holding tokenizer.json, or a tokenizer.json file)");
  if (!fs::is_directory(path, error)) return BpeTokenizer(read_json_file(path), path, TokenizerConfig{});
  return from_folder(path, read_json_file((fs::path(path) / "tokenizer.json").string()));
}

BpeTokenizer BpeTokenizer::from_folder(const std::string& dir, const nlohmann::json& tokenizer_json) {
  std::error_code error;
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  TokenizerConfig config = fs::exists(config_path, error) ? read_tokenizer_config(config_path) : TokenizerConfig{};
  return BpeTokenizer(tokenizer_json, (fs::path(dir) / "tokenizer.json").string(), std::move(config));
}

BpeTokenizer::BpeTokenizer(const nlohmann::json& tokenizer_json, const std::string& source, TokenizerConfig config)
    : BpeTokenizer(parse_tokenizer_json(tokenizer_json, source), source, std::move(config)) {}

BpeTokenizer::BpeTokenizer(TokenizerJson spec, const std::string& source, TokenizerConfig config)
    : normalizer_(spec.normalizer),
      raw_tokens_(added_tokens_where(spec, false)),
      normalized_tokens_(added_tokens_where(spec, true)),
      pre_tokenizer_(spec.pre_tokenizer, source),
      model_(spec.model, source),
      single_template_(std::move(spec.single_template)),
      source_(source),
      config_(std::move(config)) {
  // The text of every id: the model's vocabulary, overridden by added tokens (HF looks those up first).
  std::unordered_map<int64_t, const std::string*> text_of_id;
  int64_t num_ids = 0;
  for (const auto& [token, id] : spec.model.vocab) {
    text_of_id[id] = &token;
    num_ids = std::max(num_ids, id + 1);
  }
  std::unordered_set<std::string_view> special_contents;
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const AddedTokenSpec& t = spec.added_tokens[i];
    if (const auto vocab_id = model_.id_of(t.content); vocab_id && *vocab_id != t.id)
      throw IoError(source, fmt::format("added_tokens[{}]: \"{}\" has id {}, but the vocabulary gives it id {}", i,
                                        t.content, t.id, *vocab_id));
    if (const auto it = text_of_id.find(t.id); it != text_of_id.end() && *it->second != t.content)
      throw IoError(source, fmt::format("added_tokens[{}]: id {} of \"{}\" is the vocabulary's id of \"{}\"", i, t.id,
                                        t.content, *it->second));
    text_of_id[t.id] = &t.content;
    num_ids = std::max(num_ids, t.id + 1);
    if (t.special) {
      special_contents.insert(t.content);
      special_ids_.emplace(t.content, t.id);
    }
  }
  // Each id costs a slot whether it has a token or not: a stray id of 2e9 would take tens of gigabytes.
  const auto num_tokens = int64_t(text_of_id.size());
  if (num_ids > 2 * num_tokens + kIdSlack)
    throw IoError(source, fmt::format("the id {} of \"{}\" leaves {} of the {} ids up to it without a token; "
                                      "expected ids numbered from 0 with few gaps",
                                      num_ids - 1, *text_of_id.at(num_ids - 1), num_ids - num_tokens, num_ids));
  bytes_of_id_.resize(size_t(num_ids));
  kind_of_id_.assign(size_t(num_ids), IdKind::unused);
  for (const auto& [id, text] : text_of_id) {
    // HF's ByteLevel decoder keeps a token with a character outside the byte-level alphabet as its UTF-8.
    bytes_of_id_[size_t(id)] = bytes_of_byte_level(*text).value_or(*text);
    // HF skips by text: any id whose text is a special token's content counts as special.
    kind_of_id_[size_t(id)] = special_contents.contains(*text) ? IdKind::special : IdKind::ordinary;
  }

  const auto id_of_config_token = [&](const std::optional<std::string>& text,
                                      const char* key) -> std::optional<int64_t> {
    if (!text) return std::nullopt;
    for (const AddedTokenSpec& t : spec.added_tokens)
      if (t.content == *text) return t.id;
    if (const auto id = model_.id_of(*text)) return id;
    throw IoError(config_.path, fmt::format("{}: \"{}\" is not a token of {}", key, *text, source));
  };
  if (single_template_) {
    for (const TemplatePiece& piece : *single_template_)
      for (const int64_t id : piece.ids)
        if (id >= num_ids || kind_of_id_[size_t(id)] == IdKind::unused)
          throw IoError(source, fmt::format("{}: id {} is not the id of any token of model.vocab or added_tokens",
                                            piece.key, id));
  }
  bos_id_ = id_of_config_token(config_.bos_token, "bos_token");
  eos_id_ = id_of_config_token(config_.eos_token, "eos_token");
  pad_id_ = id_of_config_token(config_.pad_token, "pad_token");

  if (config_.add_bos_token) {
    const bool template_adds_bos = bos_id_ && single_template_ && !single_template_->empty() &&
                                   single_template_->front().kind == TemplatePiece::Kind::special_token &&
                                   single_template_->front().ids == std::vector<int64_t>{*bos_id_};
    if (*config_.add_bos_token != template_adds_bos)
      core::log_warning(
          "{}: add_bos_token={} has no effect: {}'s post_processor decides, as in Hugging Face's "
          "tokenizers, and it {} bos",
          config_.path, *config_.add_bos_token, source, template_adds_bos ? "prepends" : "does not prepend");
  }
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int64_t>& ids) const {
  std::vector<TextPiece> raw_pieces, normalized_pieces;
  raw_tokens_.split(text, raw_pieces);
  for (const TextPiece& raw : raw_pieces) {
    if (raw.token_id) {
      ids.push_back(*raw.token_id);
      continue;
    }
    const std::string normalized = normalizer_ == NormalizerKind::nfc ? normalize_nfc(raw.text) : std::string(raw.text);
    normalized_pieces.clear();
    normalized_tokens_.split(normalized, normalized_pieces);
    for (const TextPiece& piece : normalized_pieces) {
      if (piece.token_id) {
        ids.push_back(*piece.token_id);
        continue;
      }
      pre_tokenizer_.split(piece.text, [&](std::string_view word) { model_.encode_word(word, ids); });
    }
  }
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text, AddSpecialTokens add_special_tokens) const {
  if (const auto bad = find_invalid_utf8(text))
    throw Error(fmt::format("cannot encode: the text is not valid UTF-8 (byte 0x{:02x} at offset {} of {})",
                            uint8_t(text[*bad]), *bad, text.size()));
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens == AddSpecialTokens::no || !single_template_) {
    encode_text(text, ids);
    return ids;
  }
  for (const TemplatePiece& piece : *single_template_) {
    if (piece.kind == TemplatePiece::Kind::sequence)
      encode_text(text, ids);
    else
      ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int64_t> ids, SpecialTokens specials) const {
  std::string bytes;
  for (size_t pos = 0; pos < ids.size(); ++pos) {
    const int64_t id = ids[pos];
    if (id < 0 || id >= vocab_size() || kind_of_id_[size_t(id)] == IdKind::unused)
      throw Error(fmt::format("cannot decode token id {} at position {}: {} has {}", id, pos, source_,
                              id >= 0 && id < vocab_size() ? "no token with this id"
                                                           : fmt::format("ids 0 to {}", vocab_size() - 1)));
    if (specials == SpecialTokens::skip && kind_of_id_[size_t(id)] == IdKind::special) continue;
    bytes += bytes_of_id_[size_t(id)];
  }
  return utf8_lossy(bytes);
}

std::optional<int64_t> BpeTokenizer::special_token_id(std::string_view content) const {
  const auto it = special_ids_.find(content);
  return it == special_ids_.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

}  // namespace rf::data
