// write_safetensors_folder: huggingface_hub's sharding rule, HF's file names and index, round trips
// bit for bit through SafetensorsFolder (every dtype, sharded and not), a save replacing the files of
// a previous save of another layout, and a folder's own split (any file names, index keys kept) read
// and written back byte for byte.
#include "formats/safetensors_folder_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>

#include "formats/safetensors_folder.h"
#include "formats/safetensors_reader.h"
#include "formats/safetensors_test_files.h"
#include "support/test_support.h"

namespace rf::formats {
namespace {

namespace fs = std::filesystem;

using Shards = std::vector<std::vector<size_t>>;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(PlanSafetensorsShards, FollowsHuggingFaceHub) {
  // huggingface_hub's documented example: limit 10, sizes [6, 6, 2, 6, 2, 2] -> [6], [6+2], [6+2+2].
  EXPECT_EQ(plan_safetensors_shards({6, 6, 2, 6, 2, 2}, 10), (Shards{{0}, {1, 2}, {3, 4, 5}}));
  // Filling a shard exactly to the limit does not close it early.
  EXPECT_EQ(plan_safetensors_shards({5, 5, 1}, 10), (Shards{{0, 1}, {2}}));
  // A tensor over the limit gets its own shard at once, while the shard being filled stays open.
  EXPECT_EQ(plan_safetensors_shards({2, 12, 3, 11}, 10), (Shards{{1}, {3}, {0, 2}}));
  EXPECT_EQ(plan_safetensors_shards({12}, 10), (Shards{{0}}));
  EXPECT_EQ(plan_safetensors_shards({3, 0, 7, 0}, 10), (Shards{{0, 1, 2, 3}}));
  EXPECT_EQ(plan_safetensors_shards({}, 10), (Shards{{}}));  // one empty file, not none
}

TEST(PlanSafetensorsShards, NamesShardsAsHuggingFace) {
  EXPECT_EQ(safetensors_shard_name(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(safetensors_shard_name(11, 12), "model-00012-of-00012.safetensors");
}

class SafetensorsFolderWriter : public testing::SafetensorsTempDir {
 protected:
  // Tensors of every dtype, 291 bytes in all: 60, 120, 14, 48, 20, 16, 3, 2, 0 and 8 in this order.
  void SetUp() override {
    SafetensorsTempDir::SetUp();
    add("model.embed_tokens.weight", testing::random_tensor({5, 6}, DType::bf16, 1));
    add("w_f32", testing::random_tensor({5, 6}, DType::f32, 2));
    add("w_f16", testing::random_tensor({7}, DType::f16, 3));
    add("w_f64", testing::random_tensor({3, 2}, DType::f64, 4));
    add("ids_i32", testing::random_ids({5}, DType::i32, 5, 1000));
    Tensor ids_i64({2}, DType::i64);
    ids_i64.at<int64_t>({0}) = (int64_t(1) << 60) + 1;  // not representable in f64: must survive as bytes
    ids_i64.at<int64_t>({1}) = -3;
    add("ids_i64", std::move(ids_i64));
    Tensor bytes_u8({3}, DType::u8);
    for (int i = 0; i < 3; ++i) bytes_u8.at<uint8_t>({i}) = uint8_t(250 + i);
    add("bytes_u8", std::move(bytes_u8));
    Tensor mask({2}, DType::boolean);
    mask.at<bool>({1}) = true;
    add("mask", std::move(mask));
    add("empty", Tensor({0, 3}, DType::bf16));
    Tensor nan_bits({2}, DType::f32);
    const uint32_t payload = 0x7fc01234u;  // a NaN payload and -0.0: bits, not values, must survive
    std::memcpy(nan_bits.view().raw(), &payload, 4);
    nan_bits.at<float>({1}) = -0.0f;
    add("nan_bits", std::move(nan_bits));
  }

  void add(const std::string& name, Tensor tensor) {
    owned_.push_back(std::move(tensor));
    tensors_.emplace_back(name, owned_.back().view());
  }

  // Every tensor read back through the folder has the bytes it was written with.
  void expect_round_trip() const {
    const SafetensorsFolder folder(dir_.string());
    EXPECT_EQ(folder.names().size(), tensors_.size());
    for (const auto& [name, view] : tensors_) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(folder.contains(name));
      const Tensor back = folder.read(name, view.dtype());
      ASSERT_EQ(back.shape(), view.shape());
      EXPECT_EQ(std::memcmp(back.view().raw(), view.raw(), view.nbytes()), 0);
    }
  }

  std::vector<std::string> files_in_dir() const {
    std::vector<std::string> out;
    for (const auto& item : fs::directory_iterator(dir_)) out.push_back(item.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::deque<Tensor> owned_;
  std::vector<std::pair<std::string, TensorView>> tensors_;
};

TEST_F(SafetensorsFolderWriter, WritesOneFileWhenEverythingFits) {
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  EXPECT_EQ(write_safetensors_folder(dir_.string(), tensors_, 291, metadata),
            (std::vector<std::string>{kSafetensorsFileName}));
  EXPECT_EQ(files_in_dir(), (std::vector<std::string>{kSafetensorsFileName}));
  EXPECT_EQ(SafetensorsReader(path(kSafetensorsFileName)).metadata(), metadata);
  expect_round_trip();
}

TEST_F(SafetensorsFolderWriter, ShardsBySizeWithAnIndex) {
  const size_t limit = 130;
  const std::vector<std::string> written = write_safetensors_folder(dir_.string(), tensors_, limit, {{"format", "pt"}});
  // [60], then 120 would pass the limit: [120], then 14 would: [14, 48, 20, 16, 3, 2, 0, 8].
  const std::vector<std::string> shards = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                           "model-00003-of-00003.safetensors"};
  std::vector<std::string> expected = shards;
  expected.push_back(kSafetensorsIndexName);
  EXPECT_EQ(written, expected);
  EXPECT_EQ(files_in_dir(), expected);

  std::ifstream in(path(kSafetensorsIndexName));
  const nlohmann::json index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"], 291);
  ASSERT_EQ(index["weight_map"].size(), tensors_.size());
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], shards[0]);
  EXPECT_EQ(index["weight_map"]["w_f32"], shards[1]);
  EXPECT_EQ(index["weight_map"]["nan_bits"], shards[2]);
  for (const std::string& shard : shards) {
    const SafetensorsReader reader(path(shard));
    size_t bytes = 0;
    for (const std::string& name : reader.names()) {
      EXPECT_EQ(index["weight_map"][name], shard) << name;
      bytes += reader.entry(name).end - reader.entry(name).begin;
    }
    EXPECT_LE(bytes, limit) << shard;
    EXPECT_EQ(reader.metadata().at("format"), "pt");
  }
  expect_round_trip();
}

TEST_F(SafetensorsFolderWriter, TensorsOverTheLimitGetShardsOfTheirOwn) {
  write_safetensors_folder(dir_.string(), tensors_, 1);
  // Each of the 9 non-empty tensors is over the limit, so has a shard of its own; the empty one
  // fills the last shard alone.
  const SafetensorsFolder folder(dir_.string());
  EXPECT_EQ(folder.files().size(), tensors_.size());
  expect_round_trip();
}

TEST_F(SafetensorsFolderWriter, ReplacesThePreviousSaveOfAnotherLayout) {
  std::ofstream(path("config.json")) << "{}";
  write_safetensors_folder(dir_.string(), tensors_, 1);  // 10 shards
  write_safetensors_folder(dir_.string(), tensors_, 130);  // 3 shards: the 10-shard files must go
  EXPECT_EQ(files_in_dir(), (std::vector<std::string>{"config.json", "model-00001-of-00003.safetensors",
                                                      "model-00002-of-00003.safetensors",
                                                      "model-00003-of-00003.safetensors", kSafetensorsIndexName}));
  write_safetensors_folder(dir_.string(), tensors_, 1000);  // one file: the index and shards must go
  EXPECT_EQ(files_in_dir(), (std::vector<std::string>{"config.json", kSafetensorsFileName}));
  expect_round_trip();
  write_safetensors_folder(dir_.string(), tensors_, 130);  // sharded again: model.safetensors must go
  EXPECT_FALSE(fs::exists(path(kSafetensorsFileName)));
  expect_round_trip();
}

TEST_F(SafetensorsFolderWriter, ASplitReadIsWrittenBackByteForByte) {
  // A split no size rule gives, under names save_pretrained does not use, with an index holding more
  // than total_size (newer transformers add total_parameters; other tools other keys).
  SafetensorsSplit split;
  split.index = nlohmann::json{{"metadata", {{"total_size", 291}, {"total_parameters", 4242}}}, {"saved_by", "x"}};
  for (size_t i = 0; i < tensors_.size(); ++i)
    split.file_of[tensors_[i].first] = i % 3 == 0 ? "weights-a.safetensors" : "weights-b.safetensors";
  EXPECT_EQ(write_safetensors_folder(dir_.string(), tensors_, split, {{"format", "pt"}}),
            (std::vector<std::string>{"weights-a.safetensors", "weights-b.safetensors", kSafetensorsIndexName}));
  expect_round_trip();
  const SafetensorsFolder folder(dir_.string());
  EXPECT_EQ(folder.split(), split);
  std::map<std::string, std::string> before;
  for (const std::string& name : files_in_dir()) before[name] = file_bytes(path(name));
  EXPECT_NE(before[kSafetensorsIndexName].find("\"total_parameters\": 4242"), std::string::npos);

  const fs::path again = dir_ / "again";
  write_safetensors_folder(again.string(), tensors_, folder.split(), {{"format", "pt"}});
  for (const auto& [name, bytes] : before) EXPECT_EQ(file_bytes((again / name).string()), bytes) << name;

  // One file: every tensor in model.safetensors, no index.
  write_safetensors_folder((dir_ / "single").string(), tensors_, 1000);
  const SafetensorsSplit single = SafetensorsFolder((dir_ / "single").string()).split();
  EXPECT_FALSE(single.index);
  EXPECT_EQ(single.file_of.size(), tensors_.size());
  for (const auto& [name, file] : single.file_of) EXPECT_EQ(file, kSafetensorsFileName) << name;
}

TEST_F(SafetensorsFolderWriter, ASplitThatDoesNotFitTheTensorsIsRefused) {
  SafetensorsSplit split;
  split.index = nlohmann::json{{"metadata", {{"total_size", 0}}}};
  for (const auto& [name, view] : tensors_) split.file_of[name] = "a.safetensors";
  SafetensorsSplit missing = split;
  missing.file_of.erase("w_f32");
  EXPECT_THROW(write_safetensors_folder(dir_.string(), tensors_, missing), Error);
  SafetensorsSplit extra = split;
  extra.file_of["not.given"] = "a.safetensors";
  EXPECT_THROW(write_safetensors_folder(dir_.string(), tensors_, extra), Error);
  SafetensorsSplit outside = split;
  outside.file_of["w_f32"] = "../a.safetensors";
  EXPECT_THROW(write_safetensors_folder(dir_.string(), tensors_, outside), Error);
  SafetensorsSplit no_index = split;
  no_index.index.reset();  // without an index only model.safetensors can be found
  EXPECT_THROW(write_safetensors_folder(dir_.string(), tensors_, no_index), Error);
  EXPECT_TRUE(files_in_dir().empty());
}

TEST_F(SafetensorsFolderWriter, RejectsBadNamesBeforeWritingAnything) {
  auto twice = tensors_;
  twice.push_back(tensors_.front());  // would land in another shard, so no one file's check sees it
  EXPECT_THROW(write_safetensors_folder(dir_.string(), twice, 130), Error);
  EXPECT_THROW(write_safetensors_folder(dir_.string(), {{"__metadata__", tensors_[0].second}}, 130), Error);
  EXPECT_TRUE(files_in_dir().empty());
}

}  // namespace
}  // namespace rf::formats
