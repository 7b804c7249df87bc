// SafetensorsReader: every tensor of every reference model (dtype and shape against config.json,
// exact conversion to f64, entries tiling the data section) and hand-written files the format
// allows (empty tensors anywhere, unaligned tensors, null metadata, extra keys). Files it refuses
// are safetensors_bad_file_test.cpp.
#include "formats/safetensors_reader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "formats/safetensors_test_files.h"
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

// ---- hand-written files -------------------------------------------------------------------

using SafetensorsFile = testing::SafetensorsTempDir;

// The 8-byte length, `header` padded with spaces to `pad_to` bytes, then `data`.
std::string assemble(std::string header, const std::string& data, size_t pad_to = 8) {
  header.append((pad_to - header.size() % pad_to) % pad_to, ' ');
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out;
  for (const T& v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

TEST_F(SafetensorsFile, ReadsAHandWrittenFile) {
  // a: f32 [2, 2] at [0, 16); b: i64 [1] at [16, 24); empty: bf16 [0, 3] at [24, 24).
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]},)"
      R"( "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
      R"( "empty": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [24, 24]}})";
  const int64_t b = -(int64_t(1) << 40);
  const SafetensorsReader reader(
      write_raw("ok.safetensors", assemble(header, bytes_of({1.5f, -2.0f, 0.25f, 3.0f}) + bytes_of({b}))));

  EXPECT_EQ(reader.names(), (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_FALSE(reader.contains("__metadata__"));
  EXPECT_EQ(reader.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  const TensorView va = reader.view("a");
  EXPECT_EQ(va.dtype(), DType::f32);
  EXPECT_EQ(va.shape(), (Shape{2, 2}));
  EXPECT_EQ(va.at<float>({1, 0}), 0.25f);
  EXPECT_EQ(reader.view("b").at<int64_t>({0}), b);
  EXPECT_EQ(reader.read("b", DType::i64).at<int64_t>({0}), b);
  EXPECT_EQ(reader.read("a", DType::bf16).at<bf16>({0, 1}).bits, to_bf16(-2.0f).bits);
  EXPECT_EQ(reader.view("empty").numel(), 0);
  EXPECT_EQ(reader.entry("empty").shape, (Shape{0, 3}));
  EXPECT_EQ(reader.read("empty", DType::f32).shape(), (Shape{0, 3}));
  testing::expect_io_error([&] { (void)reader.view("c"); }, reader.path(), "no tensor named 'c'");
  // Integers are never converted: a float read of an id tensor is a mistake, not a request.
  testing::expect_io_error([&] { (void)reader.read("b", DType::f32); }, reader.path(),
                           "tensor 'b' is stored as I64 and cannot be read as f32");
}

TEST_F(SafetensorsFile, EmptyTensorsAnywhereOnTheTiling) {
  // Zero-width ranges at the start, between two tensors and at the end; a file of no tensors at all.
  const std::string header =
      R"({"first": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},)"
      R"( "x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
      R"( "between": {"dtype": "F64", "shape": [3, 0], "data_offsets": [2, 2]},)"
      R"( "y": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]},)"
      R"( "last": {"dtype": "BOOL", "shape": [0], "data_offsets": [3, 3]}})";
  const SafetensorsReader reader(write_raw("empties.safetensors", assemble(header, "\x07\x08\x09")));
  EXPECT_EQ(reader.names().size(), 5u);
  EXPECT_EQ(reader.view("y").at<uint8_t>({0}), 9);
  EXPECT_EQ(reader.entry("between").shape, (Shape{3, 0}));

  const SafetensorsReader none(write_raw("none.safetensors", assemble("{}", "")));
  EXPECT_TRUE(none.names().empty());
  EXPECT_TRUE(none.metadata().empty());
  const SafetensorsReader null_metadata(write_raw("null.safetensors", assemble(R"({"__metadata__": null})", "")));
  EXPECT_TRUE(null_metadata.metadata().empty());
}

TEST_F(SafetensorsFile, UnalignedTensorsOfAnOldWriterAreReadByCopy) {
  // Writers before safetensors 0.3 did not pad the header, so data can start at any offset; here
  // the header is padded to 5 bytes and a 1-byte tensor comes first, so `w` sits at an odd offset.
  // Keys the format does not define are ignored, as HF's reader ignores them.
  const std::string header =
      R"({"b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
      R"( "w": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13], "ignored_key": 1}})";
  const std::string file = write_raw("unaligned.safetensors",
                                     assemble(header, std::string(1, '\x05') + bytes_of({1.0f, -0.5f, 3.25f}), 5));
  const SafetensorsReader reader(file);
  ASSERT_NE((8 + header_length(file) + 1) % 4, 0u) << "the test meant an unaligned tensor";
  testing::expect_io_error([&] { (void)reader.view("w"); }, file, "tensor 'w' starts at file offset");
  const Tensor w = reader.read("w", DType::f32);
  EXPECT_EQ(w.at<float>({0}), 1.0f);
  EXPECT_EQ(w.at<float>({2}), 3.25f);
  const Tensor wide = reader.read("w", DType::f64);
  EXPECT_EQ(wide.at<double>({1}), -0.5);
  Tensor strided({3, 2}, DType::f32);
  reader.read_into("w", strided.view().select(1, 1));
  EXPECT_EQ(strided.at<float>({2, 1}), 3.25f);
  EXPECT_EQ(reader.view("b").at<uint8_t>({0}), 5);
}

}  // namespace
}  // namespace rf::formats
