// load_tokenizer: a folder's tokenizer.json decides the kind (the built-in character tokenizer's
// WordLevel save, or Hugging Face byte-level BPE), each loads as its own loader loads it, and any other
// kind or a missing file is an IoError naming tokenizer.json.
#include "data/load_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;

class LoadTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_load_tokenizer_test_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(LoadTokenizer, ACharacterTokenizersSave) {
  const CharTokenizer saved = CharTokenizer::for_task("arith");
  saved.save(dir_.string(), 16);
  const std::unique_ptr<Tokenizer> loaded = load_tokenizer(dir_.string());
  ASSERT_NE(dynamic_cast<const CharTokenizer*>(loaded.get()), nullptr);
  EXPECT_EQ(loaded->encode("12+34=46"), saved.encode("12+34=46"));
  EXPECT_EQ(loaded->eos_id(), CharTokenizer::kEosId);
}

TEST_F(LoadTokenizer, AHuggingFaceByteLevelBpe) {
  const std::string qwen3 = RF_TOKENIZER_PARITY_DIR "/qwen3";
  const std::unique_ptr<Tokenizer> loaded = load_tokenizer(qwen3);
  ASSERT_NE(dynamic_cast<const BpeTokenizer*>(loaded.get()), nullptr);
  const BpeTokenizer direct = BpeTokenizer::load(qwen3);
  const std::string text = "Hello, café <|im_end|> 12+34";
  EXPECT_EQ(loaded->encode(text), direct.encode(text));
  EXPECT_EQ(loaded->eos_id(), direct.eos_id());  // tokenizer_config.json was read too
  EXPECT_EQ(loaded->eos_id(), direct.special_token_id("<|im_end|>"));
  EXPECT_FALSE(loaded->bos_id());
}

TEST_F(LoadTokenizer, OtherKindsAndMissingFilesAreNamed) {
  const std::string path = (dir_ / "tokenizer.json").string();
  try {
    load_tokenizer(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
  }
  std::ofstream(path) << R"({"model": {"type": "Unigram", "vocab": []}})";
  try {
    load_tokenizer(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("model.type is \"Unigram\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf::data
