// JsonlDataset: SFT and verl RL rows, and every malformed input as an IoError naming the file and the
// line. DataCursor over a file: each epoch visits every row once in a seeded order, and a cursor
// saved mid-epoch resumes the exact stream.
#include "data/jsonl_dataset.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "data/data_cursor.h"

namespace rf::data {
namespace {

namespace fs = std::filesystem;

class JsonlFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_jsonl_dataset_test_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  // Reading `text` throws IoError whose path() is the file and whose message has every fragment.
  void expect_error(const std::string& text, std::initializer_list<std::string> fragments) const {
    const std::string path = write("bad.jsonl", text);
    try {
      const JsonlDataset dataset(path);
      ADD_FAILURE() << "read without error: " << text;
    } catch (const IoError& e) {
      EXPECT_EQ(e.path(), path);
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      for (const std::string& f : fragments)
        EXPECT_NE(what.find(f), std::string::npos) << "'" << f << "' not in: " << what;
    }
  }

  fs::path dir_;
};

TEST_F(JsonlFile, ReadsSftAndRlRows) {
  const std::string path = write("rows.jsonl",
                                 "{\"prompt\": \"1+2=\", \"response\": \"3\"}\n"
                                 "\n"
                                 "{\"prompt\": \"Q: 6*7?\", \"data_source\": \"gsm8k\", \"ability\": \"math\", "
                                 "\"reward_model\": {\"style\": \"rule\", \"ground_truth\": \"42\"}, "
                                 "\"extra_info\": {\"index\": 0, \"split\": \"train\"}}\r\n"
                                 "{\"prompt\": \"2+2=\", \"reward_model\": {\"ground_truth\": 4}}\n"
                                 "{\"prompt\": \"x\", \"response\": \"y\", "
                                 "\"reward_model\": {\"ground_truth\": \"z\"}}");
  const JsonlDataset dataset(path);
  EXPECT_EQ(dataset.path(), path);
  ASSERT_EQ(dataset.size(), 4u);
  EXPECT_EQ(dataset.example(0).prompt, "1+2=");
  EXPECT_EQ(dataset.example(0).response, "3");
  EXPECT_EQ(dataset.example(0).ground_truth, "3");
  EXPECT_EQ(dataset.example(1).prompt, "Q: 6*7?");
  EXPECT_EQ(dataset.example(1).response, "");
  EXPECT_EQ(dataset.example(1).ground_truth, "42");
  EXPECT_EQ(dataset.example(2).ground_truth, "4");
  EXPECT_EQ(dataset.example(3).response, "y");
  EXPECT_EQ(dataset.example(3).ground_truth, "z");
  EXPECT_THROW(dataset.example(4), Error);
}

TEST_F(JsonlFile, ErrorsNameTheFileAndLine) {
  const std::string good = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  expect_error(good + good + "{\"prompt\": \"a\", \n", {"line 3", "invalid JSON"});
  expect_error(good + "{\"response\": \"b\"}\n", {"line 2", "missing \"prompt\""});
  expect_error("\n" + good + "[1, 2]\n", {"line 3", "expected a JSON object, got array"});
  expect_error("{\"prompt\": 7, \"response\": \"b\"}\n", {"line 1", "\"prompt\" must be a string, got number"});
  expect_error("{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], \"reward_model\": {\"ground_truth\": \"x\"}}",
               {"line 1", "list of chat messages"});
  expect_error(good + "{\"prompt\": \"a\", \"response\": null}\n", {"line 2", "\"response\" must be a string"});
  expect_error("{\"prompt\": \"a\", \"reward_model\": {\"style\": \"rule\"}}", {"line 1", "\"ground_truth\""});
  expect_error("{\"prompt\": \"a\", \"reward_model\": {\"ground_truth\": [1]}}",
               {"line 1", "must be a string or a number, got array"});
  expect_error(good + good + good + "{\"prompt\": \"a\", \"answer\": \"b\"}", {"line 4", "neither \"response\""});
  expect_error("\n\n", {"no rows"});
}

// A device used to be read as one endless line until memory ran out (32 s and 16 GB for /dev/zero).
TEST_F(JsonlFile, ADeviceIsRefusedAtOnceNamingTheKeyThatNamedIt) {
  try {
    for_each_jsonl_row("/dev/zero", "data.train_files", [](const nlohmann::json&, int64_t) {});
    ADD_FAILURE() << "read /dev/zero";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), "/dev/zero");
    EXPECT_NE(std::string(e.what()).find("/dev/zero: is a character device, not a file to read JSONL rows from (named "
                                         "by data.train_files)"),
              std::string::npos)
        << e.what();
  }
}

// Parsed, a row nested a million deep used to overflow the stack in the first dump() or comparison.
TEST_F(JsonlFile, DeeplyNestedRowIsRefusedBeforeParsing) {
  const std::string good = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  expect_error(good + "{\"prompt\": " + std::string(100'000, '[') + "\n", {"line 2: nests arrays and objects deeper "
                                                                           "than 512 levels"});
  // Brackets inside strings are text.
  const std::string path = write("ok.jsonl", "{\"prompt\": \"" + std::string(1000, '[') + "\", \"response\": \"]\"}\n");
  EXPECT_EQ(JsonlDataset(path).example(0).prompt, std::string(1000, '['));
}

TEST_F(JsonlFile, MissingFileIsAnIoError) {
  const std::string path = (dir_ / "absent.jsonl").string();
  try {
    const JsonlDataset dataset(path);
    ADD_FAILURE() << "opened a missing file";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

TEST_F(JsonlFile, SeveralFilesAreReadOneAfterAnotherAndAnEmptyOneIsNamed) {
  const std::string a = write("a.jsonl", "{\"prompt\": \"a0\", \"response\": \"r\"}\n"
                                         "{\"prompt\": \"a1\", \"response\": \"r\"}\n");
  const std::string b = write("b.jsonl", "{\"prompt\": \"b0\", \"response\": \"r\"}\n");
  const JsonlDataset dataset(std::vector<std::string>{a, b});
  ASSERT_EQ(dataset.size(), 3u);
  EXPECT_EQ(dataset.example(0).prompt, "a0");
  EXPECT_EQ(dataset.example(1).prompt, "a1");
  EXPECT_EQ(dataset.example(2).prompt, "b0");
  EXPECT_EQ(dataset.path(), a + ", " + b);
  const std::string empty = write("empty.jsonl", "\n");
  try {
    const JsonlDataset with_empty(std::vector<std::string>{a, empty});
    FAIL() << "an empty file among several was accepted";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), empty);
    EXPECT_NE(std::string(e.what()).find("no rows"), std::string::npos) << e.what();
  }
}

TEST_F(JsonlFile, CursorVisitsEveryRowOncePerEpochAndResumes) {
  std::string text;
  for (int i = 0; i < 37; ++i) text += fmt::format("{{\"prompt\": \"p{}\", \"response\": \"r\"}}\n", i);
  const JsonlDataset dataset(write("rows.jsonl", text));

  DataCursor cursor{.seed = 5};
  std::vector<std::string> epoch0, epoch1;
  for (int i = 0; i < 37; ++i) epoch0.push_back(take_example(dataset, cursor).prompt);
  EXPECT_EQ(cursor, (DataCursor{.seed = 5, .epoch = 1, .next_index = 0}));
  for (int i = 0; i < 37; ++i) epoch1.push_back(take_example(dataset, cursor).prompt);
  EXPECT_EQ(std::set<std::string>(epoch0.begin(), epoch0.end()).size(), 37u);
  EXPECT_EQ(std::set<std::string>(epoch1.begin(), epoch1.end()).size(), 37u);
  EXPECT_NE(epoch0, epoch1);  // reshuffled per epoch
  std::vector<std::string> file_order;
  for (int i = 0; i < 37; ++i) file_order.push_back(fmt::format("p{}", i));
  EXPECT_NE(epoch0, file_order);

  // A cursor saved mid-epoch 1 and read back continues the same stream.
  DataCursor replay{.seed = 5};
  for (int i = 0; i < 37 + 10; ++i) take_example(dataset, replay);
  DataCursor resumed = DataCursor::from_json(nlohmann::json::parse(replay.to_json().dump()), "checkpoint");
  EXPECT_EQ(resumed, (DataCursor{.seed = 5, .epoch = 1, .next_index = 10}));
  for (int i = 10; i < 37; ++i) EXPECT_EQ(take_example(dataset, resumed).prompt, epoch1[size_t(i)]);

  DataCursor other_seed{.seed = 6};
  std::vector<std::string> other;
  for (int i = 0; i < 37; ++i) other.push_back(take_example(dataset, other_seed).prompt);
  EXPECT_NE(other, epoch0);

  DataCursor past_end{.seed = 5, .epoch = 0, .next_index = 37};
  EXPECT_THROW(take_example(dataset, past_end), Error);
}

TEST(DataCursor, FromJsonErrorsNameTheSource) {
  const auto expect_error = [](const nlohmann::json& j, const std::string& fragment) {
    try {
      DataCursor::from_json(j, "ckpt/data_cursor.json");
      ADD_FAILURE() << "read " << j.dump();
    } catch (const IoError& e) {
      EXPECT_EQ(e.path(), "ckpt/data_cursor.json");
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error({{"seed", 1}, {"epoch", 0}}, "missing \"next_index\"");
  expect_error({{"seed", 1}, {"epoch", -1}, {"next_index", 0}}, "\"epoch\" must be a non-negative integer, got -1");
  expect_error({{"seed", "1"}, {"epoch", 0}, {"next_index", 0}}, "\"seed\" must be a non-negative integer");
  expect_error(nlohmann::json::array(), "missing \"seed\"");
  const DataCursor big{.seed = ~uint64_t(0), .epoch = 3, .next_index = 12};
  EXPECT_EQ(DataCursor::from_json(nlohmann::json::parse(big.to_json().dump()), "x"), big);
  EXPECT_EQ(DataCursor::from_json({{"seed", 1}, {"epoch", 2}, {"next_index", 3}}, "x"),
            (DataCursor{.seed = 1, .epoch = 2, .next_index = 3}));
}

}  // namespace
}  // namespace rf::data
