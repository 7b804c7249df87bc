// BpeTokenizer on a tiny hand-made byte-level BPE (256 byte tokens, four merges, one added token),
// where every id can be worked out by hand: merges, added tokens, the post-processor, lossy decoding
// of partial UTF-8, and every bad input (missing and malformed files, unsupported components, bad
// merges and ids, ids outside the vocabulary, invalid UTF-8), each an error naming the file and key.
// Parity with Hugging Face on real tokenizers: bpe_tokenizer_parity_test.cpp.
#include "data/bpe_tokenizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/byte_level.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

template <class E, class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& f : fragments)
      EXPECT_NE(what.find(f), std::string::npos) << "'" << f << "' not in: " << what;
  }
}

constexpr int64_t kHe = 256, kLl = 257, kHell = 258, kSpaceW = 259, kEnd = 260, kNote = 262;  // 261 is unused

// Ids 0..255 are the bytes (as byte-level characters); merges h+e, l+l, he+ll, Ġ+w; "<|end|>" is a
// special added token, "<note>" an ordinary one matched after normalization.
json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string c;
    append_byte_level(std::string(1, char(b)), c);
    vocab[c] = b;
  }
  vocab["he"] = kHe;
  vocab["ll"] = kLl;
  vocab["hell"] = kHell;
  vocab["Ġw"] = kSpaceW;
  const auto added = [](int64_t id, const char* content, bool special, bool normalized) {
    return json{{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", normalized}, {"special", special}};
  };
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array({added(kEnd, "<|end|>", true, false), added(kNote, "<note>", false, true)})},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"vocab", vocab},
            {"merges", json::array({"h e", "l l", json::array({"he", "ll"}), "Ġ w"})}}}};
}

BpeTokenizer tiny(const json& j = tiny_tokenizer_json()) { return BpeTokenizer(j, "tiny.json", TokenizerConfig{}); }

std::vector<int64_t> bytes(std::string_view s) { return std::vector<int64_t>(s.begin(), s.end()); }

TEST(BpeTokenizer, MergesByRank) {
  const BpeTokenizer tok = tiny();
  EXPECT_EQ(tok.encode("hello"), (std::vector<int64_t>{kHell, 'o'}));
  EXPECT_EQ(tok.encode("hehe"), (std::vector<int64_t>{kHe, kHe}));
  EXPECT_EQ(tok.encode("lll"), (std::vector<int64_t>{kLl, 'l'}));  // the leftmost pair of equal rank first
  // GPT-2's regex keeps the space with the word: " w" is one word, Ġ+w merges.
  EXPECT_EQ(tok.encode("a wa"), (std::vector<int64_t>{'a', kSpaceW, 'a'}));
  EXPECT_EQ(tok.encode(""), std::vector<int64_t>{});
  EXPECT_EQ(tok.vocab_size(), kNote + 1);
}

TEST(BpeTokenizer, AddedTokensAreCutOutFirst) {
  const BpeTokenizer tok = tiny();
  EXPECT_EQ(tok.encode("he<|end|>llo"), (std::vector<int64_t>{kHe, kEnd, kLl, 'o'}));
  EXPECT_EQ(tok.encode("<|end|><|end|>"), (std::vector<int64_t>{kEnd, kEnd}));
  EXPECT_EQ(tok.encode("<|end|"), bytes("<|end|"));  // not the whole token: plain text
  EXPECT_EQ(tok.encode("x<note>"), (std::vector<int64_t>{'x', kNote}));
  EXPECT_EQ(tok.special_token_id("<|end|>"), kEnd);
  EXPECT_EQ(tok.special_token_id("<note>"), std::nullopt);  // added but not special
  EXPECT_EQ(tok.decode(std::vector<int64_t>{kHe, kEnd, kNote}, SpecialTokens::keep), "he<|end|><note>");
  EXPECT_EQ(tok.decode(std::vector<int64_t>{kHe, kEnd, kNote}, SpecialTokens::skip), "he<note>");
}

TEST(BpeTokenizer, NormalizesToNfcBeforeBpe) {
  const BpeTokenizer tok = tiny();
  // e + U+0301 is é (U+00E9) in NFC: the bytes C3 A9.
  EXPECT_EQ(tok.encode("e\xCC\x81"), (std::vector<int64_t>{0xC3, 0xA9}));
  EXPECT_EQ(tok.decode(std::vector<int64_t>{0xC3, 0xA9}, SpecialTokens::keep), "\xC3\xA9");
}

TEST(BpeTokenizer, PostProcessorOnlyWithAddSpecialTokens) {
  json j = tiny_tokenizer_json();
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array(
           {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
            {{"type", "TemplateProcessing"},
             {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
             {"pair", json::array()},
             {"special_tokens", {{"<|end|>", {{"id", "<|end|>"}, {"ids", {kEnd}}, {"tokens", {"<|end|>"}}}}}}}})}};
  const BpeTokenizer tok = tiny(j);
  EXPECT_EQ(tok.encode("he", AddSpecialTokens::yes), (std::vector<int64_t>{kEnd, kHe}));
  EXPECT_EQ(tok.encode("he", AddSpecialTokens::no), (std::vector<int64_t>{kHe}));
  EXPECT_EQ(tok.encode("", AddSpecialTokens::yes), (std::vector<int64_t>{kEnd}));
}

TEST(BpeTokenizer, DecodesPartialUtf8LossilyAsHuggingFace) {
  const BpeTokenizer tok = tiny();
  const std::string replacement = "\xEF\xBF\xBD";
  const auto decode = [&](std::vector<int64_t> ids) { return tok.decode(ids, SpecialTokens::keep); };
  EXPECT_EQ(decode({0xE4, 0xB8, 0xAD}), "\xE4\xB8\xAD");  // 中, whole
  EXPECT_EQ(decode({0xE4, 0xB8}), replacement);           // one maximal subpart: one U+FFFD
  EXPECT_EQ(decode({0xE4, 'A'}), replacement + "A");
  EXPECT_EQ(decode({0xFF, 0x80}), replacement + replacement);                      // never-valid bytes: one each
  EXPECT_EQ(decode({0xED, 0xA0, 0x80}), replacement + replacement + replacement);  // a surrogate
  EXPECT_EQ(decode({0xF0, 0x9F, 0x98, 'x', 0xF0, 0x9F, 0x98, 0x80}), replacement + "x\xF0\x9F\x98\x80");
}

// The message names the id and the tokenizer file; it used to be RF_CHECK's internal text
// ("bpe_tokenizer.cpp:160: ... (check `id >= 0 && ...` failed)").
TEST(BpeTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  const BpeTokenizer tok = tiny();
  const auto decode_error = [&](std::vector<int64_t> ids) {
    try {
      tok.decode(ids, SpecialTokens::keep);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "decoded";
    return std::string();
  };
  EXPECT_EQ(decode_error({'a', kNote + 1}), "cannot decode token id 263 at position 1: tiny.json has ids 0 to 262");
  EXPECT_EQ(decode_error({-1}), "cannot decode token id -1 at position 0: tiny.json has ids 0 to 262");
  EXPECT_EQ(decode_error({261}), "cannot decode token id 261 at position 0: tiny.json has no token with this id");
}

// Hugging Face drops a character its vocabulary has no token for (without an unk_token); the text the
// model saw would silently not be the text given.
TEST(BpeTokenizer, EncodeRefusesACharacterWithoutAToken) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"].erase("i");  // id 105 is left without a token
  const BpeTokenizer tok = tiny(j);
  EXPECT_EQ(tok.encode("hell"), (std::vector<int64_t>{kHell}));
  expect_error<IoError>([&] { tok.encode("hi"); },
                        {"tiny.json: model.vocab has no token for the character 'i' (U+0069)",
                         "model.unk_token is null", "Hugging Face would drop it silently"});
}

// A pattern PCRE2 gives up on (its match limit) used to surface as "unicode_regex.cpp:146: regex match
// failed with PCRE2 error -47 (check `rc > 0` failed)".
TEST(BpeTokenizer, ARegexThatBacktracksWithoutBoundIsNamed) {
  json j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         json::array({{{"type", "Split"},
                                       {"pattern", {{"Regex", "(a+)+$"}}},
                                       {"behavior", "Isolated"},
                                       {"invert", false}},
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const BpeTokenizer tok = tiny(j);
  EXPECT_EQ(tok.encode("aa").size(), 2u);
  expect_error<IoError>([&] { tok.encode(std::string(5000, 'a') + "b"); },
                        {"tiny.json: pre_tokenizer.pretokenizers[0].pattern: regex \"(a+)+$\" failed on a text of "
                         "5001 bytes", "PCRE2 error -47"});
}

TEST(BpeTokenizer, EncodeRejectsInvalidUtf8) {
  const BpeTokenizer tok = tiny();
  expect_error<Error>([&] { tok.encode("ab\xFF"); }, {"not valid UTF-8", "0xff", "offset 2"});
  expect_error<Error>([&] { tok.encode("\xC0\xAF"); }, {"offset 0"});          // overlong '/'
  expect_error<Error>([&] { tok.encode("x\xED\xA0\x80"); }, {"offset 1"});     // a surrogate
  expect_error<Error>([&] { tok.encode("\xE4\xB8"); }, {"offset 0"});          // truncated
  expect_error<Error>([&] { tok.encode("\xF4\x90\x80\x80"); }, {"offset 0"});  // above U+10FFFF
}

// Each broken or unsupported tokenizer.json names the file and the key.
TEST(BpeTokenizer, RejectsWhatItDoesNotImplement) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "\"WordPiece\"", "supported: BPE"}},
      {[](json& j) { j["model"].erase("type"); }, {"model: missing \"type\""}},
      {[](json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       },
       {"normalizer.type", "Lowercase", "NFC"}},
      {[](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({{{"type", "ByteLevel"}}, {{"type", "Whitespace"}}})}};
       },
       {"pre_tokenizer.pretokenizers[1].type", "Whitespace", "Split, ByteLevel, Sequence"}},
      {[](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       {"decoder.type", "WordPiece", "ByteLevel"}},
      {[](json& j) { j["decoder"] = nullptr; }, {"decoder: null is not supported"}},
      {[](json& j) {
         j["post_processor"] = {{"type", "RobertaProcessing"}};
       },
       {"post_processor.type", "RobertaProcessing"}},
      {[](json& j) {
         j["truncation"] = {{"max_length", 8}};
       },
       {"truncation: is set"}},
      {[](json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback"}},
      {[](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout", "0.1"}},
      {[](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, {"model.continuing_subword_prefix", "##"}},
      {[](json& j) { j["model"]["merges"].push_back("h q"); }, {"model.merges[4]", "\"hq\" is not in the vocabulary"}},
      {[](json& j) { j["model"]["merges"].push_back("a b c"); }, {"model.merges[4]", "two tokens"}},
      {[](json& j) { j["model"]["merges"].push_back(7); }, {"model.merges[4]", "got 7"}},
      {[](json& j) { j["model"]["vocab"]["hx"] = 5; }, {"model.vocab[\"", "id 5 is also the id of"}},
      {[](json& j) { j["model"]["vocab"]["hx"] = -5; }, {"model.vocab[\"hx\"]", "-5"}},
      {[](json& j) { j["model"]["unk_token"] = "<unk>"; }, {"model.unk_token", "<unk>"}},
      {[](json& j) { j["added_tokens"][0]["id"] = 'a'; }, {"added_tokens[0]", "id 97", "\"a\""}},
      {[](json& j) { j["added_tokens"][1]["id"] = kEnd; }, {"added_tokens[1].id", "appears twice"}},
      {[](json& j) { j["added_tokens"][0].erase("content"); }, {"added_tokens[0]: missing \"content\""}},
      // Used to load, and encode every text to no tokens (a prompt then reported as "empty").
      {[](json& j) {
         j["model"]["vocab"] = json::object();
         j["model"]["merges"] = json::array();
         j["added_tokens"] = json::array();
       },
       {"model.vocab: is empty: every text would encode to no tokens"}},
      // Used to allocate a slot per id up to 2e9 and die with std::bad_alloc.
      {[](json& j) { j["model"]["vocab"]["zz"] = 2000000000; },
       {"the id 2000000000 of \"zz\" leaves 1999999738 of the 2000000001 ids up to it without a token"}},
      // Used to put id 5000, a token of nothing, in front of every encoded text.
      {[](json& j) {
         j["post_processor"] = {
             {"type", "TemplateProcessing"},
             {"single", json::array({{{"SpecialToken", {{"id", "X"}}}}, {{"Sequence", {{"id", "A"}}}}})},
             {"special_tokens", {{"X", {{"id", "X"}, {"ids", {5000}}, {"tokens", {"X"}}}}}}};
       },
       {"post_processor.special_tokens[\"X\"].ids: id 5000 is not the id of any token"}},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       {"pre_tokenizer.pattern", "\\w", "not supported"}},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "(ab"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       {"pre_tokenizer.pattern", "does not compile", "offset"}},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Dropped"}, {"invert", false}};
       },
       {"pre_tokenizer.behavior", "\"Dropped\""}},
      {[](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"},
                                {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}})},
                                {"special_tokens", json::object()}};
       },
       {"post_processor.single[0]", "\"<s>\" is not in post_processor.special_tokens"}},
      {[](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"},
                                {"single", json::array({{{"Sequence", {{"id", "B"}, {"type_id", 0}}}}})},
                                {"special_tokens", json::object()}};
       },
       {"post_processor.single[0]", "only hold sequence A"}},
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer_json();
    c.edit(j);
    std::vector<std::string> fragments = c.fragments;
    try {
      tiny(j);
      ADD_FAILURE() << "no exception for " << fragments[0];
    } catch (const IoError& e) {
      EXPECT_EQ(e.path(), "tiny.json");
      for (const std::string& f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "'" << f << "' not in: " << e.what();
    }
  }
}

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rf_bpe_tokenizer_test_{}", ::getpid());
    fs::create_directories(dir_);
    write("tokenizer.json", tiny_tokenizer_json().dump());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string path(const std::string& name = "") const { return name.empty() ? dir_.string() : (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(TokenizerFiles, LoadsAFolderWithItsConfig) {
  write("tokenizer_config.json", R"({"bos_token": null, "eos_token": {"content": "<|end|>", "special": true},
      "pad_token": "<note>", "chat_template": "{{ messages }}", "add_bos_token": false})");
  const BpeTokenizer tok = BpeTokenizer::load(path());
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_id(), kEnd);
  EXPECT_EQ(tok.pad_id(), kNote);
  EXPECT_EQ(tok.config().chat_template, "{{ messages }}");
  EXPECT_EQ(tok.config().add_bos_token, false);
  EXPECT_EQ(tok.encode("hello"), (std::vector<int64_t>{kHell, 'o'}));
  // A tokenizer.json file alone has no config.
  EXPECT_EQ(BpeTokenizer::load(path("tokenizer.json")).eos_id(), std::nullopt);
}

TEST_F(TokenizerFiles, MissingAndMalformedFilesNameTheFile) {
  expect_error<IoError>([&] { BpeTokenizer::load(path("nowhere")); }, {path("nowhere"), "no such folder or file"});
  fs::remove(dir_ / "tokenizer.json");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); }, {path("tokenizer.json"), "cannot open"});
  write("tokenizer.json", R"({"model": {"type": "BPE", )");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); }, {path("tokenizer.json"), "not valid JSON"});
  write("tokenizer.json", tiny_tokenizer_json().dump());
  write("tokenizer_config.json", "{\"eos_token\": ");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); }, {path("tokenizer_config.json"), "not valid JSON"});
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); },
                        {path("tokenizer_config.json"), "eos_token: \"</s>\" is not a token of"});
  write("tokenizer_config.json", R"({"bos_token": 3})");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); }, {path("tokenizer_config.json"), "bos_token: expected"});
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  expect_error<IoError>([&] { BpeTokenizer::load(path()); }, {"chat_template", "\"default\""});
}

}  // namespace
}  // namespace rf::data
