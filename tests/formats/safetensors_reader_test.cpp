// SafetensorsReader: every tensor of every reference model (dtype and shape against config.json,
// exact conversion to f64, entries tiling the data section), a hand-written file, and malformed
// files, each of which must raise IoError naming the file and what is wrong.
#include "formats/safetensors_reader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "support/test_support.h"

namespace rf::formats {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

uint64_t header_length(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  return n;
}

// The shape each Hugging Face tensor name must have under a Llama / Qwen2 / Qwen3 config.
Shape expected_shape(const std::string& name, const nlohmann::json& config) {
  const int64_t C = config["hidden_size"], V = config["vocab_size"], F = config["intermediate_size"];
  const int64_t H = config["num_attention_heads"], K = config["num_key_value_heads"];
  const int64_t D = config.contains("head_dim") ? config["head_dim"].get<int64_t>() : C / H;
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return {V, C};
  if (name == "model.norm.weight") return {C};
  const std::string layer_prefix = "model.layers.";
  EXPECT_EQ(name.rfind(layer_prefix, 0), 0u) << name;
  const std::string rest = name.substr(name.find('.', layer_prefix.size()) + 1);
  if (rest == "input_layernorm.weight" || rest == "post_attention_layernorm.weight") return {C};
  if (rest == "self_attn.q_proj.weight") return {H * D, C};
  if (rest == "self_attn.k_proj.weight" || rest == "self_attn.v_proj.weight") return {K * D, C};
  if (rest == "self_attn.q_proj.bias") return {H * D};
  if (rest == "self_attn.k_proj.bias" || rest == "self_attn.v_proj.bias") return {K * D};
  if (rest == "self_attn.o_proj.weight") return {C, H * D};
  if (rest == "self_attn.q_norm.weight" || rest == "self_attn.k_norm.weight") return {D};
  if (rest == "mlp.gate_proj.weight" || rest == "mlp.up_proj.weight") return {F, C};
  if (rest == "mlp.down_proj.weight") return {C, F};
  ADD_FAILURE() << "unexpected tensor " << name;
  return {};
}

// Entries sorted by offset cover [0, data size) with no gap or overlap, as the format requires.
void expect_entries_tile_data(const SafetensorsReader& reader) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& name : reader.names()) entries.push_back(reader.entry(name));
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  size_t next = 0;
  for (const auto& e : entries) {
    EXPECT_EQ(e.begin, next) << reader.path();
    next = e.end;
  }
  EXPECT_EQ(next, fs::file_size(reader.path()) - 8 - header_length(reader.path())) << reader.path();
}

// read(name, f64) against a decode of the stored bytes written here from the format's definition.
void expect_f64_read_exact(const SafetensorsReader& reader, const std::string& name) {
  const TensorView stored = reader.view(name);
  const Tensor wide = reader.read(name, DType::f64);
  ASSERT_EQ(wide.shape(), stored.shape());
  const auto* bytes = static_cast<const unsigned char*>(stored.raw());
  int64_t nonzero = 0;
  for (int64_t i = 0; i < stored.numel(); ++i) {
    double expected = 0;
    if (stored.dtype() == DType::bf16) {
      const uint32_t bits = uint32_t(bytes[2 * i]) | uint32_t(bytes[2 * i + 1]) << 8;
      expected = std::bit_cast<float>(bits << 16);
    } else {
      ASSERT_EQ(stored.dtype(), DType::f32) << name;
      uint32_t bits = 0;
      std::memcpy(&bits, bytes + 4 * i, 4);
      expected = std::bit_cast<float>(bits);
    }
    ASSERT_TRUE(std::isfinite(expected)) << name << "[" << i << "]";
    ASSERT_EQ(wide.data<double>()[i], expected) << name << "[" << i << "]";
    nonzero += expected != 0;
  }
  EXPECT_GT(nonzero, 0) << name;
}

TEST(SafetensorsReader, ReadsEveryReferenceModelConsistentWithConfig) {
  const auto dirs = testing::reference_model_dirs();
  ASSERT_GE(dirs.size(), 4u) << "reference models under " << testing::reference_dir();
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir);
    const nlohmann::json config = read_json(fs::path(dir) / "config.json");
    const DType dtype = config["torch_dtype"] == "bfloat16" ? DType::bf16 : DType::f32;
    const SafetensorsReader reader(dir + "/model.safetensors");
    const auto names = reader.names();
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));

    ASSERT_TRUE(reader.contains("model.embed_tokens.weight"));
    EXPECT_EQ(reader.entry("model.embed_tokens.weight").shape,
              (Shape{config["vocab_size"].get<int64_t>(), config["hidden_size"].get<int64_t>()}));
    EXPECT_EQ(reader.contains("lm_head.weight"), !config["tie_word_embeddings"].get<bool>());
    const int num_layers = config["num_hidden_layers"];
    for (int l = 0; l < num_layers; ++l) {
      for (const char* part : {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.o_proj.weight",
                               "mlp.down_proj.weight"})
        EXPECT_TRUE(reader.contains(fmt::format("model.layers.{}.{}", l, part))) << l << " " << part;
    }
    EXPECT_FALSE(reader.contains(fmt::format("model.layers.{}.input_layernorm.weight", num_layers)));

    for (const auto& name : names) {
      SCOPED_TRACE(name);
      EXPECT_EQ(reader.entry(name).dtype, dtype);
      EXPECT_EQ(reader.view(name).shape(), expected_shape(name, config));
      expect_f64_read_exact(reader, name);
    }
    expect_entries_tile_data(reader);

    // The expected gradients hold one f32 tensor per parameter, with its shape, plus the loss.
    const SafetensorsReader grads(dir + "/expected_grads.safetensors");
    EXPECT_EQ(grads.names().size(), names.size() + 1);
    ASSERT_TRUE(grads.contains("loss"));
    EXPECT_EQ(grads.entry("loss").shape.numel(), 1);
    for (const auto& name : names) {
      ASSERT_TRUE(grads.contains(name)) << name;
      EXPECT_EQ(grads.entry(name).shape, reader.entry(name).shape) << name;
    }
    for (const auto& name : grads.names()) {
      EXPECT_EQ(grads.entry(name).dtype, DType::f32) << name;
      expect_f64_read_exact(grads, name);
    }
    expect_entries_tile_data(grads);
  }
}

TEST(SafetensorsReader, ReadConvertsBf16ExactlyToF64AndF32) {
  const auto dirs = testing::reference_model_dirs();
  const auto it = std::find_if(dirs.begin(), dirs.end(), [](const std::string& d) {
    return read_json(fs::path(d) / "config.json")["torch_dtype"] == "bfloat16";
  });
  ASSERT_NE(it, dirs.end()) << "no bf16 reference model";
  const SafetensorsReader reader(*it + "/model.safetensors");
  const TensorView stored = reader.view("model.embed_tokens.weight");
  ASSERT_EQ(stored.dtype(), DType::bf16);
  const Tensor as_f32 = reader.read("model.embed_tokens.weight", DType::f32);
  const Tensor back = clone(as_f32, DType::bf16);
  EXPECT_EQ(std::memcmp(back.view().raw(), stored.raw(), stored.nbytes()), 0) << "bf16 -> f32 -> bf16 not exact";
  MemoryTracker tracker;
  const Tensor accounted = reader.read("model.norm.weight", DType::f64, {&tracker, MemoryTier::host,
                                                                         MemoryCategory::params});
  EXPECT_GE(tracker.current(MemoryTier::host, MemoryCategory::params), int64_t(accounted.nbytes()));
}

// ---- hand-written and malformed files -----------------------------------------------------

class SafetensorsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_safetensors_test_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the raw bytes to `name` in the temp dir and returns the path.
  std::string write_raw(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return path;
  }
  // A safetensors file: header length, the header text, then `data_bytes` bytes of data.
  std::string write(const std::string& name, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header;
    for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(char(i));
    return write_raw(name, bytes);
  }

  // Opening `path` throws IoError whose path() is `path` and whose message names the file and
  // contains `fragment`.
  static void expect_io_error(const std::string& path, const std::string& fragment) {
    try {
      const SafetensorsReader reader(path);
      ADD_FAILURE() << path << " opened without error";
    } catch (const IoError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.path(), path);
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << what;
    }
  }

  fs::path dir_;
};

TEST_F(SafetensorsFile, ReadsAHandWrittenFile) {
  // a: f32 [2, 2] at [0, 16); b: i64 [1] at [16, 24); empty: bf16 [0, 3] at [24, 24).
  std::string header =
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]},)"
      R"( "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
      R"( "empty": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [24, 24]}})";
  header.append(8 - header.size() % 8, ' ');  // writers pad the header with spaces
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header;
  const float a[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  const int64_t b = -(int64_t(1) << 40);
  bytes.append(reinterpret_cast<const char*>(a), 16);
  bytes.append(reinterpret_cast<const char*>(&b), 8);
  const SafetensorsReader reader(write_raw("ok.safetensors", bytes));

  EXPECT_EQ(reader.names(), (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_FALSE(reader.contains("__metadata__"));
  const TensorView va = reader.view("a");
  EXPECT_EQ(va.dtype(), DType::f32);
  EXPECT_EQ(va.shape(), (Shape{2, 2}));
  EXPECT_EQ(va.at<float>({1, 0}), 0.25f);
  EXPECT_EQ(reader.view("b").at<int64_t>({0}), b);
  EXPECT_EQ(reader.read("b", DType::i64).at<int64_t>({0}), b);
  EXPECT_EQ(reader.read("a", DType::bf16).at<bf16>({0, 1}).bits, to_bf16(-2.0f).bits);
  EXPECT_EQ(reader.view("empty").numel(), 0);
  EXPECT_EQ(reader.entry("empty").shape, (Shape{0, 3}));
  try {
    (void)reader.view("c");
    ADD_FAILURE() << "no error for a missing tensor";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named 'c'"), std::string::npos) << e.what();
    EXPECT_EQ(e.path(), reader.path());
  }
}

TEST_F(SafetensorsFile, MissingFile) {
  expect_io_error((dir_ / "absent.safetensors").string(), "cannot open");
}

TEST_F(SafetensorsFile, FewerThanEightBytes) {
  expect_io_error(write_raw("short.safetensors", "abc"), "too short");
  expect_io_error(write_raw("empty.safetensors", ""), "too short");
}

TEST_F(SafetensorsFile, HeaderLengthBeyondFileSize) {
  std::string bytes(8, '\0');
  const uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  bytes += "{}";
  expect_io_error(write_raw("long_header.safetensors", bytes), "header length 1000 exceeds the file size 10");
  const uint64_t huge = ~uint64_t(0);  // would wrap if added to the 8-byte prefix
  std::memcpy(bytes.data(), &huge, 8);
  expect_io_error(write_raw("huge_header.safetensors", bytes), "exceeds the file size");
}

TEST_F(SafetensorsFile, InvalidJson) {
  expect_io_error(write("bad_json.safetensors", R"({"a": {"dtype": "F32",)", 0), "not valid JSON");
  expect_io_error(write("not_object.safetensors", "[1, 2]", 0), "not a JSON object");
}

TEST_F(SafetensorsFile, UnknownDtype) {
  expect_io_error(write("dtype.safetensors", R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}})", 2),
                  "unsupported safetensors dtype 'Q4'");
  expect_io_error(write("dtype2.safetensors", R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", 8),
                  "tensor 'w': malformed entry");
}

TEST_F(SafetensorsFile, OffsetsPastTheEnd) {
  expect_io_error(
      write("past_end.safetensors", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12),
      "data_offsets [0, 16) outside the 12 data bytes");
  expect_io_error(
      write("reversed.safetensors", R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 12),
      "data_offsets [8, 4)");
  expect_io_error(
      write("three.safetensors", R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", 12),
      "data_offsets has 3 entries");
  expect_io_error(
      write("negative_offset.safetensors", R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 12),
      "tensor 'w'");
}

TEST_F(SafetensorsFile, ByteCountNotMatchingShape) {
  expect_io_error(
      write("count.safetensors", R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24),
      "tensor 'w': ");
  expect_io_error(
      write("count2.safetensors", R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 24]}})", 24),
      "24 bytes for shape [2, 3] of bf16 (expected 12)");
}

TEST_F(SafetensorsFile, NegativeExtent) {
  expect_io_error(
      write("negative.safetensors", R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16),
      "negative extent -1");
}

TEST_F(SafetensorsFile, ExtentsWhoseProductOverflows) {
  // 2^32 x 2^32 elements: the byte count must not wrap around to match the 0 bytes given.
  expect_io_error(write("overflow.safetensors",
                        R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0),
                  "tensor 'w'");
}

TEST_F(SafetensorsFile, MissingKey) {
  expect_io_error(write("no_offsets.safetensors", R"({"w": {"dtype": "F32", "shape": [1]}})", 4), "data_offsets");
  expect_io_error(write("no_dtype.safetensors", R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4), "dtype");
  expect_io_error(write("no_shape.safetensors", R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), "shape");
}

}  // namespace
}  // namespace rf::formats
