// SafetensorsFolder: one model.safetensors, or shards listed by model.safetensors.index.json, seen
// as one set of tensors; and every way the index and its shards can disagree, each an IoError
// naming the file at fault.
#include "formats/safetensors_folder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "formats/safetensors_test_files.h"
#include "formats/safetensors_writer.h"
#include "support/test_support.h"

namespace rf::formats {
namespace {

class SafetensorsFolderTest : public testing::SafetensorsTempDir {
 protected:
  void SetUp() override {
    SafetensorsTempDir::SetUp();
    a_ = testing::random_tensor({2, 3}, DType::f32, 1);
    b_ = testing::random_tensor({4}, DType::bf16, 2);
    c_ = testing::random_tensor({3}, DType::f32, 3);
  }

  // Two shards: a and b in the first, c in the second, and the index `index_json` (by default the
  // one that matches them).
  void write_sharded(const std::string& index_json = "") {
    write_safetensors(path("model-00001-of-00002.safetensors"), {{"a", a_}, {"b", b_}});
    write_safetensors(path("model-00002-of-00002.safetensors"), {{"c", c_}});
    write_index(index_json.empty() ? R"({"metadata": {"total_size": 44}, "weight_map": {)"
                                     R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
                                     R"( "c": "model-00002-of-00002.safetensors"}})"
                                   : index_json);
  }
  void write_index(const std::string& json) { write_raw(kSafetensorsIndexName, json); }
  void expect_refused(const std::string& file, const std::string& fragment) {
    testing::expect_io_error([&] { const SafetensorsFolder folder(dir_.string()); }, file, fragment);
  }

  Tensor a_, b_, c_;
};

TEST_F(SafetensorsFolderTest, ReadsOneFile) {
  write_safetensors(path(kSafetensorsFileName), {{"a", a_}, {"b", b_}});
  const SafetensorsFolder folder(dir_.string());
  EXPECT_EQ(folder.files(), (std::vector<std::string>{path(kSafetensorsFileName)}));
  EXPECT_EQ(folder.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(testing::max_abs_diff(folder.read("a", DType::f32), a_), 0.0);
  EXPECT_EQ(folder.entry("b").dtype, DType::bf16);
  testing::expect_io_error([&] { (void)folder.file_of("z"); }, dir_.string(), "no tensor named 'z'");
}

TEST_F(SafetensorsFolderTest, ReadsShardsThroughTheIndex) {
  write_sharded();
  const SafetensorsFolder folder(dir_.string());
  EXPECT_EQ(folder.files(), (std::vector<std::string>{path("model-00001-of-00002.safetensors"),
                                                      path("model-00002-of-00002.safetensors")}));
  EXPECT_EQ(folder.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(folder.file_of("c").path(), path("model-00002-of-00002.safetensors"));
  EXPECT_EQ(testing::max_abs_diff(folder.read("c", DType::f32), c_), 0.0);
  Tensor b_f32({4}, DType::f32);
  folder.read_into("b", b_f32);
  EXPECT_EQ(testing::max_abs_diff(b_f32, b_), 0.0);  // bf16 -> f32 is exact
}

TEST_F(SafetensorsFolderTest, PrefersTheSingleFileAsTransformersDoes) {
  write_sharded();
  write_safetensors(path(kSafetensorsFileName), {{"only", c_}});
  EXPECT_EQ(SafetensorsFolder(dir_.string()).names(), (std::vector<std::string>{"only"}));
}

TEST_F(SafetensorsFolderTest, NoWeights) {
  expect_refused(dir_.string(), "no model.safetensors or model.safetensors.index.json in the model folder");
}

TEST_F(SafetensorsFolderTest, IndexNotValidJson) {
  write_sharded(R"({"weight_map": )");
  expect_refused(path(kSafetensorsIndexName), "not valid JSON");
}

// The index used to be read whole whatever it was, and parsed without a bound on its nesting.
TEST_F(SafetensorsFolderTest, IndexThatIsNotAnIndexFileIsRefused) {
  write_sharded(R"({"weight_map": )" + std::string(1000, '[') + "}");
  expect_refused(path(kSafetensorsIndexName), "nests arrays and objects deeper than 512 levels");
  std::filesystem::remove(path(kSafetensorsIndexName));
  std::filesystem::create_directory(path(kSafetensorsIndexName));
  expect_refused(path(kSafetensorsIndexName), "is a folder, not a file to read a safetensors index from");
}

TEST_F(SafetensorsFolderTest, IndexWithoutWeightMap) {
  write_sharded(R"({"metadata": {}})");
  expect_refused(path(kSafetensorsIndexName), "missing the weight_map object");
  write_index("[]");
  expect_refused(path(kSafetensorsIndexName), "not a JSON object");
}

TEST_F(SafetensorsFolderTest, WeightMapValueNotAFileName) {
  write_sharded(R"({"weight_map": {"a": 1}})");
  expect_refused(path(kSafetensorsIndexName), "weight_map['a'] is a JSON number, not a file name");
  write_index(R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})");
  expect_refused(path(kSafetensorsIndexName),
                 "weight_map['a'] = '../model-00001-of-00002.safetensors' is not a file name inside the folder");
  write_index(R"({"weight_map": {"a": ".."}})");
  expect_refused(path(kSafetensorsIndexName), "is not a file name inside the folder");
}

TEST_F(SafetensorsFolderTest, MissingShard) {
  write_sharded();
  std::filesystem::remove(path("model-00002-of-00002.safetensors"));
  expect_refused(path("model-00002-of-00002.safetensors"),
                 "missing: model.safetensors.index.json places 1 tensors in it (e.g. 'c')");
}

TEST_F(SafetensorsFolderTest, TensorNotInTheShardTheIndexNames) {
  write_sharded(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",)"
                R"( "c": "model-00002-of-00002.safetensors", "d": "model-00002-of-00002.safetensors"}})");
  expect_refused(path("model-00002-of-00002.safetensors"),
                 "has no tensor 'd', which model.safetensors.index.json places in it");
}

TEST_F(SafetensorsFolderTest, ShardHoldsATensorTheIndexDoesNotList) {
  write_sharded(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  expect_refused(path("model-00001-of-00002.safetensors"),
                 "holds tensor 'b', which model.safetensors.index.json does not list");
}

TEST_F(SafetensorsFolderTest, TensorInTwoShards) {
  write_sharded();
  write_safetensors(path("model-00002-of-00002.safetensors"), {{"c", c_}, {"a", a_}});
  expect_refused(path("model-00002-of-00002.safetensors"),
                 "holds tensor 'a', which is also in model-00001-of-00002.safetensors, where "
                 "model.safetensors.index.json places it");
}

TEST_F(SafetensorsFolderTest, BadShardIsNamed) {
  write_sharded();
  write_raw("model-00002-of-00002.safetensors", "garbage");
  expect_refused(path("model-00002-of-00002.safetensors"), "too short for a safetensors header");
}

TEST_F(SafetensorsFolderTest, NotAFolder) {
  const std::string file = write_raw("plain", "x");
  testing::expect_io_error([&] { const SafetensorsFolder folder(file); }, file, "not a folder");
}

}  // namespace
}  // namespace rf::formats
