// libFuzzer target for tokenizer.json loading and encode/decode: the input is a tokenizer.json, '\0', a
// text to encode, '\0', then ids to decode (2 bytes each, little-endian). The document is loaded as
// load_tokenizer would (byte-level BPE, or the built-in character tokenizer's WordLevel file). Loading,
// encoding and decoding may refuse with a message (any rf::Error but an RF_CHECK's CheckFailure);
// anything else escapes and libFuzzer reports it. What encode() returns
// must be ids of the tokenizer that decode() accepts, and the character tokenizer must decode what
// it encodes back to the text.
// Built with clang by cmake/Fuzzing.cmake; seeds in fuzz_corpus_tokenizer/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/utf8.h"
#include "formats/json_input.h"

namespace {

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_tokenizer: broken promise: %s\n", what);
  std::abort();
}

// An RF_CHECK's message is internal text ("file.cpp:12: ... (check `x` failed)"): reaching one from a
// file is a bug, so it is not an accepted refusal.
void expect_named(const rf::Error& e) {
  if (dynamic_cast<const rf::CheckFailure*>(&e) == nullptr) return;
  std::fprintf(stderr, "fuzz_tokenizer: an internal check reached from input: %s\n", e.what());
  std::abort();
}

std::unique_ptr<rf::data::Tokenizer> load(std::string_view text) {
  const nlohmann::json j = rf::formats::parse_json_input(text, "fuzz/tokenizer.json");
  const nlohmann::json* model = j.is_object() && j.contains("model") ? &j.at("model") : nullptr;
  if (model && model->is_object() && model->value("type", nlohmann::json()) == "WordLevel")
    return std::make_unique<rf::data::CharTokenizer>(rf::data::CharTokenizer::from_json(j, "fuzz/tokenizer.json"));
  return std::make_unique<rf::data::BpeTokenizer>(j, "fuzz/tokenizer.json", rf::data::TokenizerConfig{});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  const std::string_view json_text = input.substr(0, first);
  const std::string_view rest = first == std::string_view::npos ? std::string_view() : input.substr(first + 1);
  const size_t second = rest.find('\0');
  const std::string_view text = rest.substr(0, second);
  const std::string_view id_bytes = second == std::string_view::npos ? std::string_view() : rest.substr(second + 1);

  std::unique_ptr<rf::data::Tokenizer> tokenizer;
  try {
    tokenizer = load(json_text);
  } catch (const rf::Error& e) {
    expect_named(e);
    return 0;
  }
  const bool is_char = dynamic_cast<const rf::data::CharTokenizer*>(tokenizer.get()) != nullptr;
  for (const auto add : {rf::data::AddSpecialTokens::no, rf::data::AddSpecialTokens::yes}) {
    std::vector<int64_t> ids;
    try {
      ids = tokenizer->encode(text, add);
    } catch (const rf::Error& e) {
      expect_named(e);
      continue;
    }
    for (const int64_t id : ids) expect(id >= 0 && id < tokenizer->vocab_size(), "encode returns the tokenizer's ids");
    const std::string decoded = tokenizer->decode(ids, rf::data::SpecialTokens::keep);
    tokenizer->decode(ids, rf::data::SpecialTokens::skip);
    if (is_char) expect(decoded == text, "the character tokenizer decodes what it encodes back to the text");
    expect(!rf::data::find_invalid_utf8(decoded), "decode returns valid UTF-8");
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i + 1 < id_bytes.size(); i += 2) ids.push_back(uint8_t(id_bytes[i]) | uint8_t(id_bytes[i + 1]) << 8);
  try {
    tokenizer->decode(ids, rf::data::SpecialTokens::keep);
  } catch (const rf::Error& e) {
    expect_named(e);
  }
  return 0;
}
