// PromptSource on JSONL files in verl's columns: a chat prompt rendered with Qwen3's real template
// and tokenized with its real tokenizer (vendored in tests/data/tokenizer_parity/qwen3), the length
// rule (filter, and truncation error / left / right / middle against the full encoding), the training
// order (a permutation per epoch, drop_last, the same batches from a cursor saved as JSON), and the
// errors of bad rows, each naming the file, the line and the column; and the ids generation stops at.
#include "rl/trainer/rl_prompt_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "model/hf_folder.h"
#include "support/test_support.h"

namespace rf::rl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kQwen3Dir = std::string(RF_TOKENIZER_PARITY_DIR) + "/qwen3";

trainer::RunTokenizer tokenizer(const std::string& name) {
  trainer::ModelSection model;
  model.tokenizer = name;
  return trainer::make_run_tokenizer(model, data::DataConfig{}, nullptr);
}

// The digits tokenizer of the built-in arith task: one id per character, so lengths are easy to see.
const trainer::RunTokenizer& arith_tokens() {
  static const trainer::RunTokenizer tokens = tokenizer("builtin:arith");
  return tokens;
}

const trainer::RunTokenizer& qwen3_tokens() {
  static const trainer::RunTokenizer tokens = tokenizer(kQwen3Dir);
  return tokens;
}

class PromptSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rl_prompt_source_{}_{}",
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                                   getpid());
    fs::create_directories(dir_);
    config_.data.train_batch_size = 2;
    config_.data.max_prompt_length = 64;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `lines` as a file of the scratch folder and returns its path.
  std::string write(const std::string& name, const std::vector<std::string>& lines) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path);
    for (const std::string& line : lines) out << line << "\n";
    return path;
  }

  fs::path dir_;
  RlConfig config_;
};

std::string row(const json& prompt, const std::string& data_source = "arith", const json& ground_truth = "5") {
  return json{{"prompt", prompt}, {"data_source", data_source}, {"reward_model", {{"ground_truth", ground_truth}}}}
      .dump();
}

// A row whose prompt is the digits of `n`, padded to `width` characters.
std::string digits_row(int n, int width = 2) { return row(fmt::format("{:0{}}", n, width)); }

TEST_F(PromptSourceTest, ChatPromptIsQwen3sTemplateTextEncodedWithoutSpecialTokens) {
  const std::string question = "Natalia sold clips to 48 of her friends. How many clips did she sell?";
  const std::string suffix = " Let's think step by step and output the final answer after \"####\".";
  const json extra = {{"split", "train"}, {"index", 7}};
  json r = json::parse(row(json::array({{{"role", "user"}, {"content", question + suffix}}}), "openai/gsm8k", "72"));
  r["extra_info"] = extra;
  r["ability"] = "math";  // a column PromptSource does not read
  config_.data.train_files = config::PathList{.paths = {write("gsm8k.jsonl", {r.dump(), r.dump()})}};
  const PromptSource source(config_, qwen3_tokens());
  data::DataCursor cursor = source.start();
  const std::vector<PromptRow> batch = source.next_batch(cursor);
  ASSERT_EQ(batch.size(), 2u);
  // transformers' apply_chat_template(add_generation_prompt=True) for Qwen3, written out by hand.
  const std::string text = "<|im_start|>user\n" + question + suffix + "<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int64_t> expected = qwen3_tokens().tokenizer->encode(text, data::AddSpecialTokens::no);
  EXPECT_EQ(batch[0].tokens, expected);
  EXPECT_EQ(batch[0].tokens.front(), *qwen3_tokens().tokenizer->special_token_id("<|im_start|>"));
  EXPECT_EQ(batch[0].data_source, "openai/gsm8k");
  EXPECT_EQ(batch[0].ground_truth, json("72"));
  EXPECT_EQ(batch[0].extra_info, extra);
  EXPECT_EQ(source.data_sources().at("openai/gsm8k"), config_.data.train_files->paths.front() + ": line 1");
}

TEST_F(PromptSourceTest, QwenTextPromptHasNoBosAndBuiltinTextPromptHasOne) {
  config_.data.train_files = config::PathList{.paths = {write("text.jsonl", {row("What is 2+3?"), row("What is 2+3?")})}};
  data::DataCursor cursor{1, 0, 0};
  EXPECT_EQ(PromptSource(config_, qwen3_tokens()).next_batch(cursor)[0].tokens,
            qwen3_tokens().tokenizer->encode("What is 2+3?"));
  config_.data.train_files = config::PathList{.paths = {write("digits.jsonl", {digits_row(12), digits_row(34)})}};
  cursor = {1, 0, 0};
  std::vector<int64_t> expected = {*arith_tokens().special_ids.bos};
  for (int64_t id : arith_tokens().tokenizer->encode("12")) expected.push_back(id);
  config_.data.shuffle = false;
  EXPECT_EQ(PromptSource(config_, arith_tokens()).next_batch(cursor)[0].tokens, expected);
}

TEST_F(PromptSourceTest, TruncationKeepsTheEndTheStartOrBothEnds) {
  const std::string digits = "0123456789";  // with bos: 11 tokens
  config_.data.train_files = config::PathList{.paths = {write("long.jsonl", {row("12"), row(digits)})}};
  config_.data.val_files = config_.data.train_files;
  config_.data.max_prompt_length = 6;
  std::vector<int64_t> full = {*arith_tokens().special_ids.bos};
  for (int64_t id : arith_tokens().tokenizer->encode(digits)) full.push_back(id);
  ASSERT_EQ(full.size(), 11u);
  const auto long_prompt = [&](Truncation mode) {
    config_.data.truncation = mode;
    return PromptSource(config_, arith_tokens()).validation().at(1).tokens;
  };
  EXPECT_EQ(long_prompt(Truncation::left), std::vector<int64_t>(full.end() - 6, full.end()));
  EXPECT_EQ(long_prompt(Truncation::right), std::vector<int64_t>(full.begin(), full.begin() + 6));
  std::vector<int64_t> middle(full.begin(), full.begin() + 3);
  middle.insert(middle.end(), full.end() - 3, full.end());
  EXPECT_EQ(long_prompt(Truncation::middle), middle);
  config_.data.max_prompt_length = 5;  // odd: verl keeps limit / 2 = 2 first and 3 last tokens
  middle.assign(full.begin(), full.begin() + 2);
  middle.insert(middle.end(), full.end() - 3, full.end());
  EXPECT_EQ(long_prompt(Truncation::middle), middle);
  config_.data.truncation = Truncation::error;
  testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); },
                                   "long.jsonl: line 2: the prompt has 11 tokens, more than 5");
  config_.actor_rollout_ref.rollout.prompt_length = 4;  // the rollout's limit wins, and is named
  testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); },
                                   "actor_rollout_ref.rollout.prompt_length: ");
}

TEST_F(PromptSourceTest, FilterOverlongPromptsDropsTheLongRowsOfEachFile) {
  config_.data.train_files = config::PathList{.paths = {write("a.jsonl", {row("1"), row("123456"), row("12"), row("1234567")}),
                              write("b.jsonl", {row("99999999"), row("3")})}};
  config_.data.val_files = config_.data.train_files;
  config_.data.max_prompt_length = 4;  // bos + 3 digits
  config_.data.filter_overlong_prompts = true;
  config_.data.truncation = Truncation::left;  // never reached: filtering looks at the full length first
  const std::vector<PromptRow> kept = PromptSource(config_, arith_tokens()).validation();
  std::vector<std::string> texts;
  for (const PromptRow& p : kept)
    texts.push_back(arith_tokens().tokenizer->decode(p.tokens, data::SpecialTokens::skip));
  EXPECT_EQ(texts, (std::vector<std::string>{"1", "12", "3"}));
  config_.data.train_files = config::PathList{.paths = {write("all_long.jsonl", {row("123456")})}};
  testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); },
                                   "every row of data.train_files is longer than data.max_prompt_length = 4");
}

TEST_F(PromptSourceTest, EachEpochIsAPermutationAndACursorResumesExactly) {
  std::vector<std::string> lines;
  for (int i = 0; i < 10; ++i) lines.push_back(digits_row(i));
  config_.data.train_files = config::PathList{.paths = {write("ten.jsonl", lines)}};
  config_.data.train_batch_size = 4;  // 2 batches an epoch; 2 rows left over (drop_last)
  config_.data.seed = 7;
  const PromptSource source(config_, arith_tokens());
  const auto value = [&](const PromptRow& p) {
    return std::stoi(arith_tokens().tokenizer->decode(p.tokens, data::SpecialTokens::skip));
  };
  data::DataCursor cursor = source.start();
  std::vector<std::vector<int>> epochs(3);
  json saved;
  for (int b = 0; b < 6; ++b) {
    if (b == 3) saved = cursor.to_json();
    for (const PromptRow& p : source.next_batch(cursor)) epochs[size_t(b / 2)].push_back(value(p));
  }
  EXPECT_EQ(cursor, (data::DataCursor{7, 3, 0}));
  for (const std::vector<int>& epoch : epochs) {
    EXPECT_EQ(epoch.size(), 8u);
    EXPECT_EQ(std::set<int>(epoch.begin(), epoch.end()).size(), 8u) << "a row repeated within an epoch";
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  // A second source from the same files and seed, resumed from the cursor after batch 3.
  const PromptSource again(config_, arith_tokens());
  data::DataCursor resumed = data::DataCursor::from_json(saved, "checkpoint");
  std::vector<int> tail;
  for (int b = 3; b < 6; ++b)
    for (const PromptRow& p : again.next_batch(resumed)) tail.push_back(value(p));
  std::vector<int> expected(epochs[1].begin() + 4, epochs[1].end());
  expected.insert(expected.end(), epochs[2].begin(), epochs[2].end());
  EXPECT_EQ(tail, expected);
  // Another seed, another order; no shuffle, the file's order.
  config_.data.seed = 8;
  data::DataCursor other = PromptSource(config_, arith_tokens()).start();
  std::vector<int> first;
  for (const PromptRow& p : PromptSource(config_, arith_tokens()).next_batch(other)) first.push_back(value(p));
  EXPECT_NE(first, std::vector<int>(epochs[0].begin(), epochs[0].begin() + 4));
  config_.data.shuffle = false;
  data::DataCursor in_order = PromptSource(config_, arith_tokens()).start();
  const PromptSource ordered(config_, arith_tokens());
  for (int b = 0; b < 3; ++b) {
    std::vector<int> batch;
    for (const PromptRow& p : ordered.next_batch(in_order)) batch.push_back(value(p));
    EXPECT_EQ(batch,
              (b == 2 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4 * b, 4 * b + 1, 4 * b + 2, 4 * b + 3}));
  }
}

TEST_F(PromptSourceTest, ManyDataSourcesAreListedWhereTheyFirstAppear) {
  const std::string a =
      write("a.jsonl", {row("1"), row("2", "countdown_v1", json{{"target", 3}, {"numbers", {1, 2}}})});
  const std::string b = write("b.jsonl", {row("3", "openai/gsm8k"), row("4", "arith")});
  config_.data.train_files = config::PathList{.paths = {a}};
  config_.data.val_files = config::PathList{.paths = {b}};
  const PromptSource source(config_, arith_tokens());
  EXPECT_EQ(source.data_sources(),
            (std::map<std::string, std::string>{
                {"arith", a + ": line 1"}, {"countdown_v1", a + ": line 2"}, {"openai/gsm8k", b + ": line 1"}}));
  EXPECT_EQ(source.validation().at(0).data_source, "openai/gsm8k");
  EXPECT_TRUE(source.validation().at(1).extra_info.is_null());
}

TEST_F(PromptSourceTest, BadRowsNameTheFileTheLineAndTheColumn) {
  const auto expect_row_error = [&](const std::string& bad, const std::string& fragment) {
    const std::string path = write("bad.jsonl", {row("1"), "", bad});
    config_.data.train_files = config::PathList{.paths = {path}};
    testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); }, path + ": line 3: " + fragment);
  };
  expect_row_error(R"({"data_source": "arith", "reward_model": {"ground_truth": "1"}})", "missing \"prompt\"");
  expect_row_error(R"({"prompt": "1", "reward_model": {"ground_truth": "1"}})", "missing \"data_source\"");
  expect_row_error(R"({"prompt": "1", "data_source": 3, "reward_model": {"ground_truth": "1"}})",
                   "\"data_source\" must be a string");
  expect_row_error(R"({"prompt": 1, "data_source": "arith", "reward_model": {"ground_truth": "1"}})",
                   "\"prompt\" must be a string or a list of chat messages");
  expect_row_error(R"({"prompt": "1", "data_source": "arith"})", "missing \"reward_model\"");
  expect_row_error(R"({"prompt": "1", "data_source": "arith", "reward_model": {"style": "rule"}})",
                   "\"reward_model\" must be an object with a non-null \"ground_truth\"");
  expect_row_error(R"({"prompt": "1", "data_source": "arith", "reward_model": {"ground_truth": "1"}, "extra_info": 2})",
                   "\"extra_info\" must be an object");
  expect_row_error(R"({"prompt": [{"role": "user"}], "data_source": "arith", "reward_model": {"ground_truth": "1"}})",
                   "\"prompt\"[0].content: expected a message");
  expect_row_error(R"({"prompt": [], "data_source": "arith", "reward_model": {"ground_truth": "1"}})",
                   "\"prompt\" is an empty list of messages");
  expect_row_error(R"({"prompt": "1",)", "invalid JSON");
  // Chat messages need a chat template, which the built-in tokenizer does not have.
  expect_row_error(
      R"({"prompt": [{"role": "user", "content": "1"}], "data_source": "arith", "reward_model": {"ground_truth": "1"}})",
      "\"prompt\" is a list of chat messages, but the tokenizer builtin:arith has no tokenizer_config.json");
  // The column names come from data.prompt_key and data.reward_fn_key.
  config_.data.prompt_key = "question";
  config_.data.reward_fn_key = "source";
  const std::string renamed =
      write("renamed.jsonl", {R"({"question": "1", "source": "arith", "reward_model": {"ground_truth": "1"}})",
                              R"({"question": "2", "reward_model": {"ground_truth": "2"}})"});
  config_.data.train_files = config::PathList{.paths = {renamed}};
  testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); },
                                   renamed + ": line 2: missing \"source\" (data.reward_fn_key)");
  // Fewer usable rows than a batch.
  config_.data.prompt_key = "prompt";
  config_.data.reward_fn_key = "data_source";
  config_.data.train_batch_size = 3;
  config_.data.train_files = config::PathList{.paths = {write("two.jsonl", {row("1"), row("2")})}};
  testing::expect_error_containing([&] { PromptSource(config_, arith_tokens()); },
                                   "3 prompts per step, but data.train_files has 2 usable rows");
}

// The rollout's stop ids for a Qwen3 folder: generation_config.json's eos_token_id (a list or a number)
// and the tokenizer's eos_token (<|im_end|>), as vLLM stops.
TEST(RlStopIds, GenerationConfigIdsAndTheTokenizersEos) {
  const auto stops = [](const std::string& generation_config) {
    model::HfModelFolder folder;
    folder.side_files["tokenizer.json"] = model::read_file_bytes(kQwen3Dir + "/tokenizer.json");
    folder.side_files["generation_config.json"] = generation_config;
    trainer::ModelSection model;
    model.path = kQwen3Dir;
    const trainer::RunTokenizer tokens = trainer::make_run_tokenizer(model, data::DataConfig{}, &folder);
    return std::pair(tokens.stop_ids, tokens.special_ids.eos);
  };
  const int64_t im_end = *qwen3_tokens().tokenizer->special_token_id("<|im_end|>");
  const int64_t endoftext = *qwen3_tokens().tokenizer->special_token_id("<|endoftext|>");
  ASSERT_EQ(qwen3_tokens().tokenizer->eos_id(), im_end);
  // Qwen3-0.6B's generation_config.json: the responses end with the tokenizer's eos.
  EXPECT_EQ(stops(fmt::format(R"({{"eos_token_id": [{}, {}]}})", im_end, endoftext)),
            std::pair(std::vector<int64_t>{im_end, endoftext}, im_end));
  // A base model's: its one id ends the responses, and <|im_end|> still stops generation.
  EXPECT_EQ(stops(fmt::format(R"({{"eos_token_id": {}}})", endoftext)),
            std::pair(std::vector<int64_t>{endoftext, im_end}, endoftext));
}

}  // namespace
}  // namespace rf::rl
