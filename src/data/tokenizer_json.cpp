#include "data/tokenizer_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/input_file.h"
#include "formats/json_input.h"

namespace rf::data {
namespace {

using nlohmann::json;

// The file being parsed, so that every error names it and the key.
struct Where {
  const std::string& path;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw IoError(path, fmt::format("{}: {}", key, what));
  }
  const json& field(const json& object, const std::string& key, const char* name) const {
    if (!object.contains(name)) fail(key, fmt::format("missing \"{}\"", name));
    return object.at(name);
  }
  std::string string_field(const json& object, const std::string& key, const char* name) const {
    const json& v = field(object, key, name);
    if (!v.is_string()) fail(key + "." + name, fmt::format("expected a string, got {}", v.dump()));
    return v.get<std::string>();
  }
  // A boolean field that may be absent (then `fallback`, as in Hugging Face's serde defaults).
  bool bool_field(const json& object, const std::string& key, const char* name, bool fallback) const {
    if (!object.contains(name) || object.at(name).is_null()) return fallback;
    const json& v = object.at(name);
    if (!v.is_boolean()) fail(key + "." + name, fmt::format("expected true or false, got {}", v.dump()));
    return v.get<bool>();
  }
  int64_t id_value(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      fail(key, fmt::format("expected a token id in [0, 2^31), got {}", v.dump()));
    return v.get<int64_t>();
  }
  std::string type_of(const json& object, const std::string& key) const {
    if (!object.is_object()) fail(key, fmt::format("expected an object, got {}", object.dump()));
    return string_field(object, key, "type");
  }
};

NormalizerKind parse_normalizer(const json& n, const Where& where) {
  if (n.is_null()) return NormalizerKind::none;
  const std::string type = where.type_of(n, "normalizer");
  if (type == "NFC") return NormalizerKind::nfc;
  where.fail("normalizer.type", fmt::format("\"{}\" is not supported (supported: null, NFC)", type));
}

SplitBehavior parse_behavior(const json& v, const std::string& key, const Where& where) {
  static constexpr std::pair<const char*, SplitBehavior> kNames[] = {
      {"Removed", SplitBehavior::removed},
      {"Isolated", SplitBehavior::isolated},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  for (const auto& [name, behavior] : kNames)
    if (v == name) return behavior;
  where.fail(key, fmt::format("{} is not a split behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                              "Contiguous)",
                              v.dump()));
}

void parse_pre_tokenizer(const json& p, const std::string& key, const Where& where,
                         std::vector<PreTokenizerStep>& steps) {
  const std::string type = where.type_of(p, key);
  if (type == "Sequence") {
    const json& list = where.field(p, key, "pretokenizers");
    if (!list.is_array()) where.fail(key + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(list[i], fmt::format("{}.pretokenizers[{}]", key, i), where, steps);
  } else if (type == "ByteLevel") {
    steps.push_back(ByteLevelStep{.add_prefix_space = where.bool_field(p, key, "add_prefix_space", true),
                                  .use_regex = where.bool_field(p, key, "use_regex", true)});
  } else if (type == "Split") {
    SplitStep split;
    split.key = key;
    const json& pattern = where.field(p, key, "pattern");
    if (pattern.is_object() && pattern.size() == 1 && pattern.contains("Regex") && pattern.at("Regex").is_string()) {
      split.pattern = pattern.at("Regex").get<std::string>();
      split.pattern_kind = PatternKind::regex;
    } else if (pattern.is_object() && pattern.size() == 1 && pattern.contains("String") &&
               pattern.at("String").is_string()) {
      split.pattern = pattern.at("String").get<std::string>();
      split.pattern_kind = PatternKind::literal;
    } else {
      where.fail(key + ".pattern",
                 fmt::format("expected {{\"Regex\": ...}} or {{\"String\": ...}}, got {}", pattern.dump()));
    }
    split.behavior = parse_behavior(where.field(p, key, "behavior"), key + ".behavior", where);
    split.invert = where.bool_field(p, key, "invert", false);
    steps.push_back(std::move(split));
  } else {
    where.fail(key + ".type", fmt::format("\"{}\" is not supported (supported: Split, ByteLevel, Sequence)", type));
  }
}

std::vector<AddedTokenSpec> parse_added_tokens(const json& list, const Where& where) {
  std::vector<AddedTokenSpec> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) where.fail("added_tokens", "expected an array");
  std::set<int64_t> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = fmt::format("added_tokens[{}]", i);
    const json& t = list[i];
    if (!t.is_object()) where.fail(key, "expected an object");
    AddedTokenSpec spec;
    spec.id = where.id_value(where.field(t, key, "id"), key + ".id");
    spec.content = where.string_field(t, key, "content");
    spec.single_word = where.bool_field(t, key, "single_word", false);
    spec.lstrip = where.bool_field(t, key, "lstrip", false);
    spec.rstrip = where.bool_field(t, key, "rstrip", false);
    spec.normalized = where.bool_field(t, key, "normalized", true);
    spec.special = where.bool_field(t, key, "special", false);
    if (!ids.insert(spec.id).second) where.fail(key + ".id", fmt::format("id {} appears twice", spec.id));
    tokens.push_back(std::move(spec));
  }
  return tokens;
}

BpeModelSpec parse_model(const json& m, const Where& where) {
  const std::string type = where.type_of(m, "model");
  if (type != "BPE") where.fail("model.type", fmt::format("\"{}\" is not supported (supported: BPE)", type));
  BpeModelSpec spec;
  if (m.contains("dropout") && !m.at("dropout").is_null() && m.at("dropout") != 0)
    where.fail("model.dropout", fmt::format("{} is not supported: BPE dropout is for training a tokenizer (use null)",
                                            m.at("dropout").dump()));
  if (where.bool_field(m, "model", "byte_fallback", false))
    where.fail("model.byte_fallback", "true is not supported (byte-level BPE never falls back to <0xNN> tokens)");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(affix) && !m.at(affix).is_null() && m.at(affix) != "")
      where.fail(fmt::format("model.{}", affix),
                 fmt::format("{} is not supported (use null or \"\")", m.at(affix).dump()));
  if (m.contains("unk_token") && !m.at("unk_token").is_null())
    spec.unk_token = where.string_field(m, "model", "unk_token");
  spec.fuse_unk = where.bool_field(m, "model", "fuse_unk", false);
  spec.ignore_merges = where.bool_field(m, "model", "ignore_merges", false);

  const json& vocab = where.field(m, "model", "vocab");
  if (!vocab.is_object()) where.fail("model.vocab", "expected an object of token -> id");
  if (vocab.empty()) where.fail("model.vocab", "is empty: every text would encode to no tokens");
  spec.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items())
    spec.vocab.emplace_back(token, where.id_value(id, fmt::format("model.vocab[\"{}\"]", token)));

  const json& merges = where.field(m, "model", "merges");
  if (!merges.is_array()) where.fail("model.merges", "expected an array");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    // The older format "a b"; Hugging Face skips "#version" lines of merges.txt here too.
    const std::string line = merge.is_string() ? merge.get<std::string>() : std::string();
    if (merge.is_string() && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (!merge.is_string() || space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      where.fail(fmt::format("model.merges[{}]", i),
                 fmt::format("expected [\"a\", \"b\"] or \"a b\" (two tokens, one space), got {}", merge.dump()));
    spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return spec;
}

std::vector<TemplatePiece> parse_template(const json& processor, const std::string& key, const Where& where) {
  const json& specials = where.field(processor, key, "special_tokens");
  if (!specials.is_object()) where.fail(key + ".special_tokens", "expected an object");
  const json& single = where.field(processor, key, "single");
  if (!single.is_array()) where.fail(key + ".single", "expected an array of pieces");
  std::vector<TemplatePiece> pieces;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string piece_key = fmt::format("{}.single[{}]", key, i);
    const json& piece = single[i];
    if (piece.is_object() && piece.contains("Sequence")) {
      const json& sequence = piece.at("Sequence");
      if (!sequence.is_object() || sequence.value("id", json()) != "A")
        where.fail(piece_key, fmt::format("a single-sequence template can only hold sequence A, got {}", piece.dump()));
      pieces.push_back({TemplatePiece::Kind::sequence, {}, piece_key});
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      const json& token = piece.at("SpecialToken");
      const std::string name = token.is_object() ? token.value("id", std::string()) : std::string();
      if (!specials.contains(name))
        where.fail(piece_key, fmt::format("special token \"{}\" is not in {}.special_tokens", name, key));
      const std::string ids_key = fmt::format("{}.special_tokens[\"{}\"].ids", key, name);
      const json& ids = where.field(specials.at(name), ids_key, "ids");
      if (!ids.is_array() || ids.empty()) where.fail(ids_key, "expected a non-empty array of ids");
      TemplatePiece special{TemplatePiece::Kind::special_token, {}, ids_key};
      for (const json& id : ids) special.ids.push_back(where.id_value(id, ids_key));
      pieces.push_back(std::move(special));
    } else {
      where.fail(piece_key,
                 fmt::format("expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}, got {}", piece.dump()));
    }
  }
  return pieces;
}

void parse_post_processor(const json& p, const std::string& key, const Where& where,
                          std::optional<std::vector<TemplatePiece>>& single_template) {
  if (p.is_null()) return;
  const std::string type = where.type_of(p, key);
  if (type == "ByteLevel") return;  // trims offsets; the ids are unchanged
  if (type == "TemplateProcessing") {
    // Hugging Face cannot chain two templates either (the second would see several encodings).
    if (single_template) where.fail(key, "a second TemplateProcessing is not supported");
    single_template = parse_template(p, key, where);
  } else if (type == "Sequence") {
    const json& list = where.field(p, key, "processors");
    if (!list.is_array()) where.fail(key + ".processors", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(list[i], fmt::format("{}.processors[{}]", key, i), where, single_template);
  } else {
    where.fail(key + ".type",
               fmt::format("\"{}\" is not supported (supported: ByteLevel, TemplateProcessing, Sequence)", type));
  }
}

}  // namespace

TokenizerJson parse_tokenizer_json(const json& j, const std::string& path) {
  const Where where{path};
  if (!j.is_object()) where.fail("(top level)", "expected a JSON object");
  for (const char* unsupported : {"truncation", "padding"})
    if (j.contains(unsupported) && !j.at(unsupported).is_null())
      where.fail(unsupported, "is set, but encode() neither truncates nor pads (use null)");
  TokenizerJson out;
  out.normalizer = parse_normalizer(j.value("normalizer", json()), where);
  const json pre_tokenizer = j.value("pre_tokenizer", json());
  if (!pre_tokenizer.is_null()) parse_pre_tokenizer(pre_tokenizer, "pre_tokenizer", where, out.pre_tokenizer);
  out.added_tokens = parse_added_tokens(j.value("added_tokens", json()), where);
  out.model = parse_model(where.field(j, "(top level)", "model"), where);
  parse_post_processor(j.value("post_processor", json()), "post_processor", where, out.single_template);
  const json decoder = j.value("decoder", json());
  if (decoder.is_null())
    where.fail("decoder",
               "null is not supported (supported: ByteLevel; without it decode() would join tokens with spaces)");
  if (const std::string type = where.type_of(decoder, "decoder"); type != "ByteLevel")
    where.fail("decoder.type", fmt::format("\"{}\" is not supported (supported: ByteLevel)", type));
  return out;
}

json read_json_file(const std::string& path) {
  return formats::parse_json_input(core::read_input_file(path, kMaxTokenizerFileBytes, "a tokenizer JSON file"), path);
}

}  // namespace rf::data
