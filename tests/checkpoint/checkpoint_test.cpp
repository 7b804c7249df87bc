// Native sharded checkpoints: round trips of every dtype and of JSON state, loading at another
// layout than the one saved (row and column shards, several shards in one file, replicas, sub-blocks,
// dtype conversion), what is and is not visible before commit, replacement of a step, and every
// corruption the reader must report as an IoError naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/element_access.h"
#include "formats/safetensors_reader.h"
#include "support/test_support.h"

namespace rf::checkpoint {
namespace {

namespace fs = std::filesystem;

// Runs `fn`, which must throw IoError whose path() is `path` and whose message names `path` and
// contains `fragment`.
void expect_io_error(const std::function<void()>& fn, const std::string& path, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no IoError (expected one naming " << path << ")";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << what;
  }
}

void expect_same_bits(TensorView actual, TensorView expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const size_t size = actual.element_size();
  int64_t index = 0;
  for_each_offset(actual.shape(), actual.strides(), expected.strides(), [&](int64_t a, int64_t e) {
    EXPECT_EQ(std::memcmp(static_cast<const char*>(actual.raw()) + a * int64_t(size),
                          static_cast<const char*>(expected.raw()) + e * int64_t(size), size),
              0)
        << what << " element " << index++;
  });
}

// A [6, 4] f32 tensor holding 10 * row + column, so any misplaced element is visible.
Tensor grid_6x4() {
  Tensor t({6, 4}, DType::f32);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 4; ++c) t.at<float>({r, c}) = float(10 * r + c);
  return t;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = (fs::path(::testing::TempDir()) / fmt::format("rf_checkpoint_test_{}_{}", ::getpid(), info->name())).string();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string path(const std::string& relative) const { return (fs::path(root_) / relative).string(); }

  // Everything in the root folder, hidden entries included, sorted.
  std::vector<std::string> root_entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // A committed step with one tensor "w" (all elements `value`) in "actor" and a JSON document in
  // "trainer".
  void save_step(int64_t step, float value, const std::string& extra_tensor = "") {
    Tensor w({2, 3}, DType::f32);
    for (int64_t i = 0; i < 6; ++i) w.data<float>()[i] = value;
    CheckpointWriter writer(root_, step);
    std::vector<ShardedTensor> shards = {whole_tensor("w", w)};
    if (!extra_tensor.empty()) shards.push_back(whole_tensor(extra_tensor, w));
    writer.add_tensors("actor", "model", shards);
    writer.add_json("trainer", "state", {{"value", value}});
    writer.commit();
  }

  float read_w(int64_t step) const {
    const CheckpointReader reader(root_, step);
    Tensor w({2, 3}, DType::f32);
    reader.read_tensor("actor", "w", w);
    return w.at<float>({1, 2});
  }

  std::string root_;
};

TEST_F(Checkpoint, RoundTripsEveryDtypeAndJson) {
  Tensor w_f32 = testing::random_tensor({3, 4}, DType::f32, 1);
  Tensor w_bf16 = testing::random_tensor({7}, DType::bf16, 2);
  Tensor base_f64 = testing::random_tensor({3, 2}, DType::f64, 3);
  const TensorView w_f64 = base_f64.view().transpose(0, 1);  // strided input
  Tensor ids_i64({2}, DType::i64);
  ids_i64.at<int64_t>({0}) = (int64_t(1) << 60) + 1;
  ids_i64.at<int64_t>({1}) = -5;
  Tensor scalar({}, DType::f32);
  scalar.at<float>({}) = 0.125f;
  Tensor exp_avg = testing::random_tensor({3, 4}, DType::f32, 4);
  const nlohmann::json state = {{"rng", {{"seed", 7}, {"offset", 123456789012345ull}}},
                                {"data_position", 17},
                                {"name", "run-a"},
                                {"max", UINT64_MAX}};

  CheckpointWriter writer(root_, 5);
  writer.add_tensors("actor", "model",
                     {whole_tensor("layers.0.w", w_f32), whole_tensor("embed", w_bf16), whole_tensor("f64", w_f64),
                      whole_tensor("ids", ids_i64), whole_tensor("scale", scalar)});
  writer.add_tensors("optimizer", "adam", {whole_tensor("layers.0.w.exp_avg", exp_avg)});
  writer.add_json("trainer", "state", state);
  writer.commit();

  EXPECT_EQ(CheckpointReader::latest_step(root_), 5);
  EXPECT_EQ(root_entries(), (std::vector<std::string>{"global_step_5", "latest_checkpointed_iteration.txt"}));
  EXPECT_TRUE(fs::is_regular_file(path("global_step_5/manifest.json")));
  EXPECT_TRUE(fs::is_regular_file(path("global_step_5/trainer/state.json")));
  // One shard per tensor: the file is a plain safetensors file keyed by the tensor names.
  const formats::SafetensorsReader plain(path("global_step_5/actor/model.safetensors"));
  EXPECT_EQ(plain.names(), (std::vector<std::string>{"embed", "f64", "ids", "layers.0.w", "scale"}));

  const CheckpointReader reader(root_, 5);
  EXPECT_EQ(reader.step(), 5);
  EXPECT_EQ(reader.components(), (std::vector<std::string>{"actor", "optimizer", "trainer"}));
  EXPECT_EQ(reader.tensor_names("actor"), (std::vector<std::string>{"embed", "f64", "ids", "layers.0.w", "scale"}));
  EXPECT_TRUE(reader.tensor_names("trainer").empty());
  EXPECT_EQ(reader.global_shape("actor", "f64"), (Shape{2, 3}));
  const std::vector<std::pair<std::string, TensorView>> saved = {
      {"layers.0.w", w_f32}, {"embed", w_bf16}, {"f64", w_f64}, {"ids", ids_i64}, {"scale", scalar}};
  for (const auto& [name, view] : saved) {
    Tensor loaded(view.shape(), view.dtype());
    reader.read_tensor("actor", name, loaded);
    expect_same_bits(loaded, view, name);
  }
  Tensor loaded_avg({3, 4}, DType::f32);
  reader.read_tensor("optimizer", "layers.0.w.exp_avg", loaded_avg);
  expect_same_bits(loaded_avg, exp_avg, "exp_avg");
  EXPECT_EQ(reader.read_json("trainer", "state"), state);

  // f32 saved, bf16 wanted (and back up to f64): rounded as clone() rounds.
  Tensor as_bf16({3, 4}, DType::bf16);
  reader.read_tensor("actor", "layers.0.w", as_bf16);
  expect_same_bits(as_bf16, clone(w_f32, DType::bf16), "f32 -> bf16");
  Tensor as_f64({7}, DType::f64);
  reader.read_tensor("actor", "embed", as_f64);
  expect_same_bits(as_f64, clone(w_bf16, DType::f64), "bf16 -> f64");
}

TEST_F(Checkpoint, LoadsAnyRegionFromRowColumnAndReplicatedShards) {
  const Tensor full = grid_6x4();
  CheckpointWriter writer(root_, 1);
  // Rows: one file per "rank", as TP/PP ranks will write them.
  writer.add_tensors("rows", "rank0", {{"w", full.view().slice(0, 0, 3), {6, 4}, {0, 0}}});
  writer.add_tensors("rows", "rank1", {{"w", full.view().slice(0, 3, 3), {6, 4}, {3, 0}}});
  // Columns: two strided shards in one file.
  writer.add_tensors("cols", "model",
                     {{"w", full.view().slice(1, 0, 2), {6, 4}, {0, 0}}, {"w", full.view().slice(1, 2, 2), {6, 4}, {0, 2}}});
  // Replicas: the whole tensor twice (as DP ranks would), and two row blocks that overlap in row 1.
  writer.add_tensors("replicas", "dp0", {whole_tensor("w", full)});
  writer.add_tensors("replicas", "dp1", {whole_tensor("w", full), {"v", full.view().slice(0, 1, 5), {6, 4}, {1, 0}}});
  writer.add_tensors("replicas", "dp2", {{"v", full.view().slice(0, 0, 2), {6, 4}, {0, 0}}});
  writer.commit();

  const formats::SafetensorsReader cols_file(path("global_step_1/cols/model.safetensors"));
  EXPECT_EQ(cols_file.names(), (std::vector<std::string>{"w@0,0", "w@0,2"}));

  const CheckpointReader reader(root_, 1);
  for (const std::string component : {"rows", "cols", "replicas"}) {
    SCOPED_TRACE(component);
    EXPECT_EQ(reader.global_shape(component, "w"), (Shape{6, 4}));
    Tensor loaded({6, 4}, DType::f32);
    reader.read_tensor(component, "w", loaded);
    expect_same_bits(loaded, full, "full");

    // A block across the shard boundaries, into a strided destination with sentinels around it.
    testing::GuardedTensor block({3, 2}, DType::f32, testing::Layout::strided);
    reader.read_tensor(component, "w", block, {2, 1});
    expect_same_bits(block, full.view().slice(0, 2, 3).slice(1, 1, 2), "block [2:5, 1:3]");
    block.expect_sentinels_intact("block");

    // The same block converted to bf16.
    Tensor block_bf16({3, 2}, DType::bf16);
    reader.read_tensor(component, "w", block_bf16, {2, 1});
    EXPECT_EQ(to_f32(block_bf16.at<bf16>({2, 1})), 42.0f);

    // A single element and an empty region.
    Tensor one({1, 1}, DType::f32);
    reader.read_tensor(component, "w", one, {5, 3});
    EXPECT_EQ(one.at<float>({0, 0}), 53.0f);
    Tensor none({0, 4}, DType::f32);
    reader.read_tensor(component, "w", none, {6, 0});
  }
  Tensor v({6, 4}, DType::f32);
  reader.read_tensor("replicas", "v", v);
  expect_same_bits(v, full, "v from overlapping shards");
}

TEST_F(Checkpoint, RegionNotCoveredOrOutsideTheTensorIsAnIoErrorAndLeavesDstUntouched) {
  const Tensor full = grid_6x4();
  Tensor ids({2}, DType::i64);
  CheckpointWriter writer(root_, 2);
  writer.add_tensors("actor", "rank0", {{"w", full.view().slice(0, 0, 3), {6, 4}, {0, 0}}, whole_tensor("ids", ids)});
  writer.commit();
  const CheckpointReader reader(root_, 2);
  const std::string step_dir = path("global_step_2");

  Tensor dst({6, 4}, DType::f32);
  for (int64_t i = 0; i < dst.numel(); ++i) dst.data<float>()[i] = -1.0f;
  expect_io_error([&] { reader.read_tensor("actor", "w", dst); }, step_dir,
                  "actor/w: elements [3:6, 0:4] of the requested region [0:6, 0:4] are in no saved shard");
  for (int64_t i = 0; i < dst.numel(); ++i) ASSERT_EQ(dst.data<float>()[i], -1.0f) << "dst written at " << i;
  Tensor top({3, 4}, DType::f32);
  reader.read_tensor("actor", "w", top, {0, 0});
  expect_same_bits(top, full.view().slice(0, 0, 3), "the saved rows");

  expect_io_error([&] { reader.read_tensor("actor", "w", top, {4, 0}); }, step_dir,
                  "region [4:7, 0:4] leaves the saved global shape [6, 4]");
  expect_io_error([&] { reader.read_tensor("actor", "w", top, {-1, 0}); }, step_dir, "leaves the saved global shape");
  expect_io_error([&] { reader.read_tensor("actor", "w", top, {0}); }, step_dir, "saved with global shape [6, 4]");
  Tensor wrong({5, 4}, DType::f32);
  expect_io_error([&] { reader.read_tensor("actor", "w", wrong); }, step_dir, "the destination has shape [5, 4]");
  Tensor ids_f32({2}, DType::f32);
  expect_io_error([&] { reader.read_tensor("actor", "ids", ids_f32); }, path("global_step_2/actor/rank0.safetensors"),
                  "actor/ids is saved as i64 and cannot be read into f32");
}

TEST_F(Checkpoint, UnknownNamesAreIoErrorsNamingTheManifest) {
  save_step(1, 1.0f);
  const CheckpointReader reader(root_, 1);
  const std::string manifest = path("global_step_1/manifest.json");
  expect_io_error([&] { reader.tensor_names("critic"); }, manifest, "no component 'critic' (saved: actor, trainer)");
  expect_io_error([&] { reader.global_shape("actor", "v"); }, manifest, "component 'actor' has no tensor 'v'");
  expect_io_error([&] { reader.read_json("trainer", "rng"); }, manifest, "component 'trainer' has no JSON document 'rng'");
}

TEST_F(Checkpoint, TruncatedFileIsAnIoErrorNamingIt) {
  save_step(1, 1.0f);
  const std::string file = path("global_step_1/actor/model.safetensors");
  const uintmax_t size = fs::file_size(file);
  fs::resize_file(file, size - 3);
  expect_io_error([&] { CheckpointReader(root_, 1); }, file,
                  fmt::format("truncated: expected {} bytes, got {}", size, size - 3));
  fs::resize_file(file, size + 5);
  expect_io_error([&] { CheckpointReader(root_, 1); }, file, fmt::format("expected {} bytes, got {}", size, size + 5));
}

TEST_F(Checkpoint, FlippedByteIsAChecksumMismatchNamingTheFile) {
  save_step(1, 1.0f);
  for (const std::string relative : {"global_step_1/actor/model.safetensors", "global_step_1/trainer/state.json"}) {
    const std::string file = path(relative);
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = std::streamoff(fs::file_size(file)) - 2;  // inside the data / the JSON text
    io.seekg(at);
    const char byte = char(io.get());
    io.seekp(at);
    io.put(char(byte ^ 0x10));
    io.close();
    expect_io_error([&] { CheckpointReader(root_, 1); }, file, "checksum mismatch");
    std::fstream restore(file, std::ios::in | std::ios::out | std::ios::binary);
    restore.seekp(at);
    restore.put(byte);
  }
  EXPECT_EQ(read_w(1), 1.0f);
}

TEST_F(Checkpoint, MissingFileOrManifestIsAnIoErrorNamingIt) {
  save_step(1, 1.0f);
  const std::string json = path("global_step_1/trainer/state.json");
  fs::remove(json);
  expect_io_error([&] { CheckpointReader(root_, 1); }, json, "missing");
  const std::string manifest = path("global_step_1/manifest.json");
  fs::remove(manifest);
  expect_io_error([&] { CheckpointReader(root_, 1); }, manifest, "missing: the checkpoint is incomplete");
  expect_io_error([&] { CheckpointReader(root_, 4); }, path("global_step_4"), "missing: no such checkpoint folder");
}

TEST_F(Checkpoint, MalformedManifestIsAnIoErrorNamingIt) {
  save_step(1, 1.0f);
  const std::string manifest = path("global_step_1/manifest.json");
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(manifest));
  const auto expect_rejected = [&](const nlohmann::json& bad, const std::string& fragment) {
    write_text(manifest, bad.dump());
    expect_io_error([&] { CheckpointReader(root_, 1); }, manifest, fragment);
  };
  write_text(manifest, "{\"format\": ");
  expect_io_error([&] { CheckpointReader(root_, 1); }, manifest, "not valid JSON");

  nlohmann::json bad = good;
  bad["version"] = 99;
  expect_rejected(bad, "version: expected 1");
  bad = good;
  bad["step"] = 2;
  expect_rejected(bad, "records step 2, but lies in global_step_1");
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["shards"][0]["global_offset"] = {1, 0};
  expect_rejected(bad, "components.actor.tensors.w.shards[0]: box at offset [1, 0] of shape [2, 3] leaves global shape [2, 3]");
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["shards"][0]["file"] = "other.safetensors";
  expect_rejected(bad, "'other.safetensors' is not listed in files");
  bad = good;
  bad["components"]["actor"]["files"]["model.safetensors"]["xxh64"] = "xyz";
  expect_rejected(bad, "components.actor.files.model.safetensors.xxh64: 'xyz' is not 16 hex digits");
  bad = good;
  bad["components"]["../outside"] = good["components"]["actor"];
  expect_rejected(bad, "components.../outside: is not a plain folder name");
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["shards"][0]["dtype"] = "Q4";
  expect_rejected(bad, "components.actor.tensors.w.shards[0].dtype: unknown dtype 'Q4'");
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["shards"][0].erase("dtype");
  expect_rejected(bad, "components.actor.tensors.w.shards[0].dtype: is missing");

  // Consistent with the checksums, but naming a tensor the file does not hold, or with another shape.
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["shards"][0]["key"] = "nope";
  write_text(manifest, bad.dump());
  expect_io_error([&] { CheckpointReader(root_, 1); }, path("global_step_1/actor/model.safetensors"),
                  "has no tensor 'nope' (a shard of 'w' in the manifest)");
  bad = good;
  bad["components"]["actor"]["tensors"]["w"]["global_shape"] = {3, 3};
  bad["components"]["actor"]["tensors"]["w"]["shards"][0]["shape"] = {3, 3};
  write_text(manifest, bad.dump());
  expect_io_error([&] { CheckpointReader(root_, 1); }, path("global_step_1/actor/model.safetensors"),
                  "'w' is f32[2, 3], but the manifest records f32[3, 3]");

  write_text(manifest, good.dump());
  EXPECT_EQ(read_w(1), 1.0f);
}

TEST_F(Checkpoint, LatestPointer) {
  EXPECT_EQ(CheckpointReader::latest_step(root_), std::nullopt) << "no root folder yet";
  save_step(3, 3.0f);
  EXPECT_EQ(CheckpointReader::latest_step(root_), 3);
  EXPECT_EQ(fs::file_size(path("latest_checkpointed_iteration.txt")), 1u) << "verl writes the bare number";
  save_step(7, 7.0f);
  EXPECT_EQ(CheckpointReader::latest_step(root_), 7);
  EXPECT_EQ(read_w(3), 3.0f) << "an older step stays loadable";

  const std::string pointer = path("latest_checkpointed_iteration.txt");
  write_text(pointer, "3\n");
  EXPECT_EQ(CheckpointReader::latest_step(root_), 3);
  for (const std::string text : {"abc", "", "-3", "12abc", "3 4", "99999999999999999999"}) {
    write_text(pointer, text);
    expect_io_error([&] { CheckpointReader::latest_step(root_); }, pointer,
                    fmt::format("expected a step number, got '{}'", text));
  }
  write_text(pointer, "9");
  expect_io_error([&] { CheckpointReader::latest_step(root_); }, pointer,
                  fmt::format("names step 9, but {} does not exist", path("global_step_9")));
}

TEST_F(Checkpoint, UncommittedWriterLeavesNothingVisible) {
  save_step(1, 1.0f);
  const auto before = root_entries();
  {
    Tensor w({2, 3}, DType::f32);
    CheckpointWriter writer(root_, 2);
    writer.add_tensors("actor", "model", {whole_tensor("w", w)});
    writer.add_json("trainer", "state", {{"value", 2}});
    EXPECT_FALSE(fs::exists(path("global_step_2")));
    EXPECT_EQ(CheckpointReader::latest_step(root_), 1);
    expect_io_error([&] { CheckpointReader(root_, 2); }, path("global_step_2"), "missing");
  }
  EXPECT_EQ(root_entries(), before) << "the temp folder must be removed";
  EXPECT_EQ(CheckpointReader::latest_step(root_), 1);
  EXPECT_EQ(read_w(1), 1.0f);
}

TEST_F(Checkpoint, ResavingAStepReplacesItOnlyOnCommit) {
  save_step(3, 1.0f);
  {
    Tensor w({2, 3}, DType::f32);
    for (int64_t i = 0; i < 6; ++i) w.data<float>()[i] = 2.0f;
    CheckpointWriter writer(root_, 3);
    writer.add_tensors("actor", "model", {whole_tensor("w", w), whole_tensor("extra", w)});
    EXPECT_EQ(read_w(3), 1.0f) << "replaced before commit";
    EXPECT_EQ(CheckpointReader(root_, 3).tensor_names("actor"), (std::vector<std::string>{"w"}));
    writer.commit();
    EXPECT_EQ(read_w(3), 2.0f);
  }
  const CheckpointReader reader(root_, 3);
  EXPECT_EQ(reader.tensor_names("actor"), (std::vector<std::string>{"extra", "w"}));
  EXPECT_EQ(reader.components(), (std::vector<std::string>{"actor"})) << "the old step's files must be gone";
  EXPECT_EQ(CheckpointReader::latest_step(root_), 3);
  EXPECT_EQ(root_entries(), (std::vector<std::string>{"global_step_3", "latest_checkpointed_iteration.txt"}));
}

TEST_F(Checkpoint, UnwritableRootIsAnIoErrorNamingIt) {
  fs::create_directories(root_);
  write_text(path("plain_file"), "x");
  // A path under a regular file: not creatable even by root, unlike a chmod 0500 folder.
  const std::string root = path("plain_file/checkpoints");
  expect_io_error([&] { CheckpointWriter(root, 1); }, root, "cannot create the checkpoint folder");
  expect_io_error([&] { CheckpointWriter(path("plain_file"), 1); }, path("plain_file"),
                  "cannot create the checkpoint folder");
}

TEST_F(Checkpoint, WriterRejectsBadArguments) {
  const Tensor full = grid_6x4();
  CheckpointWriter writer(root_, 1);
  const ShardedTensor w = whole_tensor("w", full);
  EXPECT_THROW(writer.add_tensors("a/b", "model", {w}), Error);
  EXPECT_THROW(writer.add_tensors(".hidden", "model", {w}), Error);
  EXPECT_THROW(writer.add_tensors("", "model", {w}), Error);
  EXPECT_THROW(writer.add_tensors("actor", "../model", {w}), Error);
  EXPECT_THROW(writer.add_json("actor", "", {}), Error);
  EXPECT_THROW(writer.add_tensors("actor", "model", {{"w", full, {6, 4}, {1, 0}}}), Error) << "leaves the tensor";
  EXPECT_THROW(writer.add_tensors("actor", "model", {{"w", full, {6, 4}, {0}}}), Error) << "rank mismatch";
  EXPECT_THROW(writer.add_tensors("actor", "model", {{"w", full.view().slice(0, 0, 3), {6, 4}, {0, 0}},
                                                     {"w", full.view().slice(0, 3, 3), {6, 4}, {0, 0}}}),
               Error)
      << "two shards at one offset";
  EXPECT_THROW(writer.add_tensors("actor", "model", {{"w", full, {6, 4}, {0, 0}}, {"w", full, {7, 4}, {0, 0}}}), Error)
      << "global shapes disagree";
  writer.add_tensors("actor", "model", {w});
  EXPECT_THROW(writer.add_tensors("actor", "model", {w}), Error) << "file stem used twice";
  EXPECT_THROW(writer.add_tensors("actor", "rank1", {{"w", full.view().slice(0, 0, 3), {7, 4}, {0, 0}}}), Error)
      << "global shape differs from the earlier file";
  writer.commit();
  EXPECT_THROW(writer.add_json("trainer", "state", {}), Error) << "after commit";
  EXPECT_THROW(writer.commit(), Error);
  // The rejected calls left no trace: the committed step holds exactly the one valid file.
  const CheckpointReader reader(root_, 1);
  EXPECT_EQ(reader.components(), (std::vector<std::string>{"actor"}));
  Tensor loaded({6, 4}, DType::f32);
  reader.read_tensor("actor", "w", loaded);
  expect_same_bits(loaded, full, "w");
}


// A checkpoint of another model is refused before anything is read: the saved global shape and dtype of
// each tensor must be the run's (else each tensor would load as its top-left box).
TEST_F(Checkpoint, ExpectTensorRefusesAnotherShapeOrDtypeNamingBoth) {
  save_step(1, 2.0f);
  const CheckpointReader reader(root_, 1);
  reader.expect_tensor("actor", "w", Shape{2, 3}, DType::f32);
  testing::expect_error_containing([&] { reader.expect_tensor("actor", "w", Shape{1, 3}, DType::f32); },
                                   "actor/w was saved with shape [2, 3], but the run's model has [1, 3]");
  testing::expect_error_containing([&] { reader.expect_tensor("actor", "w", Shape{2, 3}, DType::bf16); },
                                   "actor/w was saved as f32");
  EXPECT_TRUE(reader.has_json("trainer", "state"));
  EXPECT_FALSE(reader.has_json("trainer", "metrics_row"));
  EXPECT_FALSE(reader.has_json("critic", "state"));
}

}  // namespace
}  // namespace rf::checkpoint
