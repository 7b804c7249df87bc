#include "data/char_tokenizer.h"

#include "formats/atomic_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/task.h"
#include "data/tokenizer_json.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;  // keeps the files in the order Hugging Face writes them

constexpr const char* kUnkToken = "<unk>";
constexpr size_t kShownTextChars = 60;  // of a text that cannot be encoded, in the error

bool is_printable_ascii(char c) { return c >= 0x20 && c <= 0x7e; }


OrderedJson tokenizer_json(const std::string& alphabet) {
  OrderedJson added_tokens = OrderedJson::array();
  OrderedJson vocab = OrderedJson::object();
  for (int64_t id = 0; id < CharTokenizer::kNumSpecialTokens; ++id) {
    const std::string content(CharTokenizer::kSpecialTokens[size_t(id)]);
    added_tokens.push_back({{"id", id},
                            {"content", content},
                            {"single_word", false},
                            {"lstrip", false},
                            {"rstrip", false},
                            {"normalized", false},
                            {"special", true}});
    vocab[content] = id;
  }
  for (size_t i = 0; i < alphabet.size(); ++i)
    vocab[std::string(1, alphabet[i])] = CharTokenizer::kNumSpecialTokens + int64_t(i);
  OrderedJson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added_tokens);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "."}}}, {"behavior", "Isolated"}, {"invert", false}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "Fuse"}};
  j["model"] = {{"type", "WordLevel"}, {"vocab", std::move(vocab)}, {"unk_token", kUnkToken}};
  return j;
}

OrderedJson special_tokens_map_json() {
  return {{"bos_token", CharTokenizer::kSpecialTokens[CharTokenizer::kBosId]},
          {"eos_token", CharTokenizer::kSpecialTokens[CharTokenizer::kEosId]},
          {"pad_token", CharTokenizer::kSpecialTokens[CharTokenizer::kPadId]}};
}

// The alphabet of a tokenizer.json written by save(), in id order. Anything else is an IoError.
std::string alphabet_from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  const auto expect = [&](const char* field, const OrderedJson& written) {
    const nlohmann::json expected = nlohmann::json::parse(written.dump());  // compared without key order
    const nlohmann::json actual = j.contains(field) ? j.at(field) : nlohmann::json();
    if (actual != expected)
      throw IoError(path, fmt::format("{} is {}, expected {}: only the built-in character tokenizer format is "
                                      "supported here (byte-level BPE files load with BpeTokenizer)",
                                      field, actual.dump(), expected.dump()));
  };
  if (!j.is_object()) throw IoError(path, "not a JSON object");
  expect("normalizer", nullptr);
  expect("pre_tokenizer", tokenizer_json("")["pre_tokenizer"]);
  expect("post_processor", nullptr);
  expect("decoder", tokenizer_json("")["decoder"]);
  const nlohmann::json model = j.contains("model") ? j.at("model") : nlohmann::json();
  if (!model.is_object() || model.value("type", nlohmann::json()) != "WordLevel" ||
      !model.contains("vocab") || !model.at("vocab").is_object())
    throw IoError(path, fmt::format("model {} is not a WordLevel model with a vocab: only the built-in character "
                                    "tokenizer format is supported here (byte-level BPE files load with BpeTokenizer)",
                                    model.is_object() ? model.value("type", nlohmann::json()).dump() : model.dump()));
  const nlohmann::json& vocab = model.at("vocab");
  std::vector<std::string> token_of_id(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= vocab.size() ||
        !token_of_id[id.get<size_t>()].empty())
      throw IoError(path, fmt::format("vocab entry \"{}\": id {} is not a distinct id in [0, {})", token, id.dump(),
                                      vocab.size()));
    token_of_id[id.get<size_t>()] = token;
  }
  std::string alphabet;
  for (size_t id = 0; id < token_of_id.size(); ++id) {
    const std::string& token = token_of_id[id];
    if (id < size_t(CharTokenizer::kNumSpecialTokens)) {
      if (token != CharTokenizer::kSpecialTokens[id])
        throw IoError(path, fmt::format("vocab id {} is \"{}\", expected \"{}\"", id, token,
                                        CharTokenizer::kSpecialTokens[id]));
    } else if (token.size() != 1 || !is_printable_ascii(token[0])) {
      throw IoError(path, fmt::format("vocab entry \"{}\" (id {}) is not one printable ASCII character", token, id));
    } else {
      alphabet += token;
    }
  }
  return alphabet;
}

}  // namespace

CharTokenizer::CharTokenizer(std::string alphabet) : alphabet_(std::move(alphabet)) {
  id_of_char_.fill(-1);
  for (size_t i = 0; i < alphabet_.size(); ++i) {
    const char c = alphabet_[i];
    RF_CHECK(is_printable_ascii(c), "tokenizer alphabet: character 0x{:02x} at position {} is not printable ASCII",
             uint8_t(c), i);
    RF_CHECK(id_of_char_[size_t(c)] < 0, "tokenizer alphabet: '{}' appears twice", c);
    id_of_char_[size_t(c)] = kNumSpecialTokens + int64_t(i);
  }
}

CharTokenizer CharTokenizer::for_task(const std::string& task_name) { return CharTokenizer(task_alphabet(task_name)); }

std::vector<int64_t> CharTokenizer::encode(std::string_view text, AddSpecialTokens /*add_special_tokens*/) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const std::optional<int64_t> special = [&]() -> std::optional<int64_t> {
      for (size_t s = 0; s < kSpecialTokens.size(); ++s)
        if (text.substr(pos).starts_with(kSpecialTokens[s])) return int64_t(s);
      return std::nullopt;
    }();
    if (special) {
      ids.push_back(*special);
      pos += kSpecialTokens[size_t(*special)].size();
      continue;
    }
    const auto byte = uint8_t(text[pos]);
    const int64_t id = byte < id_of_char_.size() ? id_of_char_[byte] : -1;
    if (id < 0) {
      const bool cut = text.size() > kShownTextChars;
      throw Error(fmt::format("cannot encode \"{}{}\": the character {}(0x{:02x}) at position {} is not in the "
                              "character tokenizer's alphabet \"{}\"",
                              text.substr(0, kShownTextChars), cut ? "..." : "",
                              is_printable_ascii(char(byte)) ? fmt::format("'{}' ", char(byte)) : std::string(), byte,
                              pos, alphabet_));
    }
    ids.push_back(id);
    ++pos;
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const int64_t> ids, SpecialTokens specials) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t pos = 0; pos < ids.size(); ++pos) {
    const int64_t id = ids[pos];
    if (id < 0 || id >= vocab_size())
      throw Error(fmt::format("cannot decode token id {} at position {}: the character tokenizer has ids 0 to {}", id,
                              pos, vocab_size() - 1));
    if (id >= kNumSpecialTokens)
      text += alphabet_[size_t(id - kNumSpecialTokens)];
    else if (specials == SpecialTokens::keep)
      text += kSpecialTokens[size_t(id)];
  }
  return text;
}

std::optional<int64_t> CharTokenizer::special_token_id(std::string_view content) const {
  for (size_t s = 0; s < kSpecialTokens.size(); ++s)
    if (kSpecialTokens[s] == content) return int64_t(s);
  return std::nullopt;
}

std::map<std::string, std::string> CharTokenizer::hf_files(int64_t model_max_length) const {
  RF_CHECK(model_max_length > 0, "tokenizer model_max_length must be positive, got {}", model_max_length);
  OrderedJson config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  config.update(special_tokens_map_json());
  config["model_max_length"] = model_max_length;
  // transformers would otherwise "clean up" spaces before punctuation, which a character model emits on purpose.
  config["clean_up_tokenization_spaces"] = false;
  return {{"tokenizer.json", tokenizer_json(alphabet_).dump(2) + "\n"},
          {"tokenizer_config.json", config.dump(2) + "\n"},
          {"special_tokens_map.json", special_tokens_map_json().dump(2) + "\n"}};
}

void CharTokenizer::save(const std::string& dir, int64_t model_max_length) const {
  const auto files = hf_files(model_max_length);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw IoError(dir, fmt::format("cannot create the folder: {}", error.message()));
  for (const auto& [name, contents] : files) formats::write_file_atomically((fs::path(dir) / name).string(), contents);
}

CharTokenizer CharTokenizer::load(const std::string& dir) {
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  return from_json(read_json_file(path), path);
}

CharTokenizer CharTokenizer::from_json(const nlohmann::json& tokenizer_json, const std::string& path) {
  // alphabet_from_tokenizer_json checks everything the constructor does (one printable character per id).
  return CharTokenizer(alphabet_from_tokenizer_json(tokenizer_json, path));
}

}  // namespace rf::data
