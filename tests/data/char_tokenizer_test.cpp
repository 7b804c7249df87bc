// CharTokenizer: ids of the built-in alphabets, encode/decode round trips with and without special
// tokens, errors that name the offending character, id or file, and the Hugging Face folder that
// save() writes (parsed back and checked field by field) and load() reads.
#include "data/char_tokenizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;

// EXPECT that `fn` throws E whose message contains every fragment.
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

TEST(CharTokenizer, ArithAlphabetIds) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  EXPECT_EQ(tok.alphabet(), "0123456789+-*= ");
  EXPECT_EQ(tok.vocab_size(), 18);
  EXPECT_EQ(tok.encode("12+34="), (std::vector<int64_t>{4, 5, 13, 6, 7, 16}));
  EXPECT_EQ(tok.encode("0 9*-"), (std::vector<int64_t>{3, 17, 12, 15, 14}));
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(CharTokenizer::for_task("reversal").encode("az="), (std::vector<int64_t>{3, 28, 29}));
}

TEST(CharTokenizer, DecodeInvertsEncode) {
  const CharTokenizer tok = CharTokenizer::for_task("reversal");
  for (const std::string text : {"", "a", "hello=olleh", "zyx=abc"}) {
    const std::vector<int64_t> ids = tok.encode(text);
    EXPECT_EQ(ids.size(), text.size());
    EXPECT_EQ(tok.decode(ids, SpecialTokens::keep), text);
    EXPECT_EQ(tok.decode(ids, SpecialTokens::skip), text);
  }
}

TEST(CharTokenizer, SpecialTokens) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.special_token_id("<pad>"), 0);
  EXPECT_EQ(tok.special_token_id("<eos>"), 2);
  EXPECT_EQ(tok.special_token_id("<unk>"), std::nullopt);
  EXPECT_EQ(tok.special_token_id("1"), std::nullopt);  // an ordinary token is not special
  // Special-token text in the input becomes the special id, as in Hugging Face's encode.
  const std::vector<int64_t> ids = tok.encode("<bos>12<eos><pad>");
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 4, 5, 2, 0}));
  EXPECT_EQ(tok.decode(ids, SpecialTokens::keep), "<bos>12<eos><pad>");
  EXPECT_EQ(tok.decode(ids, SpecialTokens::skip), "12");
}

// The messages name the text, the character and the alphabet; they used to be RF_CHECK's internal text
// ("char_tokenizer.cpp:140: ... (check `id >= 0` failed)"), reached from any JSONL row the alphabet lacks.
TEST(CharTokenizer, UnknownCharacterNamesItAndItsPosition) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const auto encode_error = [&](std::string_view text) {
    try {
      tok.encode(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "encoded " << text;
    return std::string();
  };
  EXPECT_EQ(encode_error("12+a4="), "cannot encode \"12+a4=\": the character 'a' (0x61) at position 3 is not in the "
                                    "character tokenizer's alphabet \"0123456789+-*= \"");
  EXPECT_NE(encode_error("1\n").find("the character (0x0a) at position 1"), std::string::npos);
  EXPECT_NE(encode_error("<bo").find("'<' (0x3c) at position 0"), std::string::npos);  // not a whole special token
  EXPECT_NE(encode_error(std::string(100, '1') + "x").find("\"" + std::string(60, '1') + "...\""), std::string::npos);
}

TEST(CharTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  const CharTokenizer tok = CharTokenizer::for_task("arith");
  const std::vector<int64_t> too_large = {4, 18};
  expect_error<Error>([&] { tok.decode(too_large, SpecialTokens::keep); },
                      {"cannot decode token id 18 at position 1: the character tokenizer has ids 0 to 17"});
  const std::vector<int64_t> negative = {-1};
  expect_error<Error>([&] { tok.decode(negative, SpecialTokens::skip); }, {"token id -1", "position 0"});
}

TEST(CharTokenizer, AlphabetMustBeDistinctPrintableAscii) {
  expect_error<Error>([] { CharTokenizer("abca"); }, {"'a' appears twice"});
  expect_error<Error>([] { CharTokenizer("ab\t"); }, {"0x09", "position 2"});
  expect_error<Error>([] { CharTokenizer("a\xc3\xa9"); }, {"0xc3", "position 1"});
}

TEST(CharTokenizer, UnknownTaskIsAConfigError) {
  try {
    CharTokenizer::for_task("sorting");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "data.task");
    EXPECT_NE(std::string(e.what()).find("'sorting'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("arith, reversal"), std::string::npos) << e.what();
  }
}

// ---- the Hugging Face folder ------------------------------------------------------------------

class TokenizerFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_char_tokenizer_test_{}", ::getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json read_json(const std::string& name) const {
    std::ifstream in(dir_ / name);
    return nlohmann::json::parse(in);
  }
  void write_text(const std::string& name, const std::string& text) const {
    fs::create_directories(dir_);
    std::ofstream(dir_ / name) << text;
  }
  // load() throws IoError whose path() is the folder's tokenizer.json and whose message has `fragment`.
  void expect_load_error(const std::string& fragment) const {
    const std::string file = (dir_ / "tokenizer.json").string();
    try {
      CharTokenizer::load(dir_.string());
      ADD_FAILURE() << "loaded without error";
    } catch (const IoError& e) {
      EXPECT_EQ(e.path(), file);
      const std::string what = e.what();
      EXPECT_NE(what.find(file), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << what;
    }
  }

  fs::path dir_;
};

TEST_F(TokenizerFolder, SaveThenLoadRoundTrips) {
  for (const std::string task : {"arith", "reversal"}) {
    const CharTokenizer saved = CharTokenizer::for_task(task);
    saved.save(dir_.string(), 64);
    const CharTokenizer loaded = CharTokenizer::load(dir_.string());
    EXPECT_EQ(loaded.alphabet(), saved.alphabet()) << task;
    EXPECT_EQ(loaded.vocab_size(), saved.vocab_size()) << task;
    const std::string text = task == "arith" ? "<bos>12+34=46<eos>" : "<bos>abc=cba<eos>";
    EXPECT_EQ(loaded.encode(text), saved.encode(text)) << task;
  }
  // Every file was renamed into place: no temp file is left behind.
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().extension(), ".json") << entry.path();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 3);
}

TEST_F(TokenizerFolder, TokenizerJsonHasTheHuggingFaceStructure) {
  CharTokenizer::for_task("arith").save(dir_.string(), 128);
  const nlohmann::json j = read_json("tokenizer.json");
  EXPECT_EQ(j["version"], "1.0");
  EXPECT_TRUE(j["normalizer"].is_null());
  EXPECT_TRUE(j["post_processor"].is_null());
  EXPECT_EQ(j["pre_tokenizer"],
            nlohmann::json::parse(R"({"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated",
                                      "invert": false})"));
  EXPECT_EQ(j["decoder"], nlohmann::json::parse(R"({"type": "Fuse"})"));
  const nlohmann::json& model = j["model"];
  EXPECT_EQ(model["type"], "WordLevel");
  EXPECT_EQ(model["unk_token"], "<unk>");
  EXPECT_FALSE(model["vocab"].contains("<unk>"));  // unknown characters are an error, as in encode()
  ASSERT_EQ(model["vocab"].size(), 18u);
  EXPECT_EQ(model["vocab"]["<pad>"], 0);
  EXPECT_EQ(model["vocab"]["<bos>"], 1);
  EXPECT_EQ(model["vocab"]["<eos>"], 2);
  EXPECT_EQ(model["vocab"]["0"], 3);
  EXPECT_EQ(model["vocab"]["="], 16);
  EXPECT_EQ(model["vocab"][" "], 17);
  ASSERT_EQ(j["added_tokens"].size(), 3u);
  for (int64_t id = 0; id < 3; ++id) {
    const nlohmann::json& t = j["added_tokens"][size_t(id)];
    EXPECT_EQ(t["id"], id);
    EXPECT_EQ(t["content"], CharTokenizer::kSpecialTokens[size_t(id)]);
    EXPECT_EQ(t["special"], true);
    EXPECT_EQ(t["normalized"], false);
    EXPECT_EQ(t["lstrip"], false);
    EXPECT_EQ(t["rstrip"], false);
    EXPECT_EQ(t["single_word"], false);
  }

  const nlohmann::json config = read_json("tokenizer_config.json");
  EXPECT_EQ(config["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(config["bos_token"], "<bos>");
  EXPECT_EQ(config["eos_token"], "<eos>");
  EXPECT_EQ(config["pad_token"], "<pad>");
  EXPECT_EQ(config["model_max_length"], 128);
  EXPECT_EQ(config["clean_up_tokenization_spaces"], false);
  EXPECT_EQ(read_json("special_tokens_map.json"),
            nlohmann::json::parse(R"({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"})"));
}

TEST_F(TokenizerFolder, SaveOverwritesAnEarlierTokenizer) {
  CharTokenizer::for_task("arith").save(dir_.string(), 64);
  CharTokenizer::for_task("reversal").save(dir_.string(), 32);
  EXPECT_EQ(CharTokenizer::load(dir_.string()).alphabet(), "abcdefghijklmnopqrstuvwxyz=");
  EXPECT_EQ(read_json("tokenizer_config.json")["model_max_length"], 32);
}

TEST_F(TokenizerFolder, SaveIntoAFileIsAnIoError) {
  write_text("not_a_folder", "x");
  const std::string target = (dir_ / "not_a_folder").string();
  try {
    CharTokenizer::for_task("arith").save(target, 64);
    ADD_FAILURE() << "saved into a file";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), target);
  }
}

TEST_F(TokenizerFolder, LoadRejectsOtherTokenizerKinds) {
  // A byte-level BPE tokenizer.json as Qwen and Llama ship it (abridged).
  write_text("tokenizer.json", R"({"version": "1.0", "added_tokens": [], "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "post_processor": null, "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  expect_load_error("only the built-in character tokenizer format is supported here");
  expect_load_error("ByteLevel");
}

TEST_F(TokenizerFolder, LoadRejectsAWordLevelModelOverWords) {
  CharTokenizer::for_task("arith").save(dir_.string(), 64);
  nlohmann::json j = read_json("tokenizer.json");
  j["model"]["type"] = "WordPiece";
  write_text("tokenizer.json", j.dump());
  expect_load_error("\"WordPiece\"");

  j = read_json("tokenizer.json");
  j["model"]["type"] = "WordLevel";
  j["model"]["vocab"]["12"] = 18;
  write_text("tokenizer.json", j.dump());
  expect_load_error("vocab entry \"12\" (id 18) is not one printable ASCII character");

  j["model"]["vocab"]["12"] = 3;
  write_text("tokenizer.json", j.dump());
  expect_load_error("is not a distinct id");

  j["model"]["vocab"].erase("12");
  j["model"]["vocab"]["<pad>"] = 17;
  j["model"]["vocab"][" "] = 0;
  write_text("tokenizer.json", j.dump());
  expect_load_error("vocab id 0 is \" \", expected \"<pad>\"");
}

TEST_F(TokenizerFolder, LoadReportsMissingAndMalformedFiles) {
  expect_load_error("cannot open");
  write_text("tokenizer.json", "{\"model\": ");
  expect_load_error("not valid JSON");
  write_text("tokenizer.json", "[1, 2]");
  expect_load_error("not a JSON object");
}

}  // namespace
}  // namespace rf::data
