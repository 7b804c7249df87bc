// write_safetensors: files written here read back through SafetensorsReader bit for bit (every dtype,
// scalars, empty tensors, strided views), with an 8-aligned header, every tensor aligned to its
// element size and no gap between tensors, the metadata map, atomic replacement, and the errors;
// and the bytes are Hugging Face's: its header layout, and every reference model (written by HF's
// safetensors) rewritten here byte for byte.
#include "formats/safetensors_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/element_access.h"
#include "formats/safetensors_reader.h"
#include "support/test_support.h"

namespace rf::formats {
namespace {

namespace fs = std::filesystem;

uint64_t header_length(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  return n;
}

// The 8-byte length and the JSON header as stored, without parsing through the reader.
std::pair<uint64_t, nlohmann::json> raw_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  return {n, nlohmann::json::parse(text)};
}

// Every element of `actual` equals the one of `expected` bit for bit (same dtype, any strides).
void expect_same_bits(TensorView actual, TensorView expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const size_t size = actual.element_size();
  int64_t index = 0;
  for_each_offset(actual.shape(), actual.strides(), expected.strides(), [&](int64_t a, int64_t e) {
    EXPECT_EQ(std::memcmp(static_cast<const char*>(actual.raw()) + a * int64_t(size),
                          static_cast<const char*>(expected.raw()) + e * int64_t(size), size),
              0)
        << what << " element " << index;
    ++index;
  });
}

class SafetensorsWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_safetensors_writer_test_{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(SafetensorsWriter, RoundTripsEveryDtypeAlignedAndWithoutGaps) {
  Tensor w_f32 = testing::random_tensor({3, 5}, DType::f32, 1);
  Tensor w_bf16 = testing::random_tensor({7}, DType::bf16, 2);
  Tensor w_f16 = testing::random_tensor({3}, DType::f16, 3);
  Tensor w_f64 = testing::random_tensor({2, 2}, DType::f64, 4);
  Tensor ids_i32 = testing::random_ids({5}, DType::i32, 5, 1000);
  Tensor ids_i64({2}, DType::i64);
  ids_i64.at<int64_t>({0}) = (int64_t(1) << 60) + 1;  // not representable in f64: must survive as bytes
  ids_i64.at<int64_t>({1}) = -3;
  Tensor bytes_u8({3}, DType::u8);
  for (int i = 0; i < 3; ++i) bytes_u8.at<uint8_t>({i}) = uint8_t(250 + i);
  Tensor mask({2}, DType::boolean);
  mask.at<bool>({1}) = true;
  Tensor scalar({}, DType::f32);
  scalar.at<float>({}) = -0.5f;
  Tensor empty({0, 3}, DType::bf16);
  // Odd sizes first in call order, so a writer that kept call order would misalign the f64.
  const std::vector<std::pair<std::string, TensorView>> tensors = {
      {"u8", bytes_u8}, {"bf16", w_bf16}, {"f64", w_f64},   {"bool", mask},      {"f16", w_f16},
      {"i64", ids_i64}, {"f32", w_f32},   {"i32", ids_i32}, {"scalar", scalar}, {"empty", empty}};
  const std::string file = path("all.safetensors");
  write_safetensors(file, tensors, {{"format", "pt"}, {"step", "12"}});

  const SafetensorsReader reader(file);
  ASSERT_EQ(reader.names().size(), tensors.size());
  for (const auto& [name, view] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(reader.contains(name));
    expect_same_bits(reader.view(name), view, name);
    EXPECT_EQ(reader.entry(name).begin % view.element_size(), 0u) << "misaligned";
  }
  EXPECT_EQ(reader.view("i64").at<int64_t>({0}), (int64_t(1) << 60) + 1);
  EXPECT_EQ(reader.entry("scalar").shape.rank(), 0);
  EXPECT_EQ(reader.entry("empty").shape, (Shape{0, 3}));

  const auto [header_size, header] = raw_header(file);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"format", "pt"}, {"step", "12"}}));
  std::vector<SafetensorsEntry> entries;
  for (const auto& name : reader.names()) entries.push_back(reader.entry(name));
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.end < b.end; });
  size_t next = 0;
  for (const auto& e : entries) {
    EXPECT_EQ(e.begin, next);
    next = e.end;
  }
  EXPECT_EQ(next, fs::file_size(file) - 8 - header_size);
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

TEST_F(SafetensorsWriter, StridedViewsAreWrittenAsContiguousCopies) {
  Tensor base = testing::random_tensor({4, 6}, DType::f32, 7);
  const TensorView transposed = base.view().transpose(0, 1);  // [6, 4], strides [1, 6]
  const TensorView columns = base.view().slice(1, 1, 3);      // [4, 3], row stride 6
  Tensor base_bf16 = testing::random_tensor({3, 2, 4}, DType::bf16, 8);
  const TensorView inner = base_bf16.view().slice(2, 1, 2).transpose(0, 2);  // [2, 2, 3]
  ASSERT_FALSE(transposed.is_contiguous());
  ASSERT_FALSE(columns.is_contiguous());
  ASSERT_FALSE(inner.is_contiguous());
  const std::string file = path("strided.safetensors");
  write_safetensors(file, {{"t", transposed}, {"c", columns}, {"inner", inner}});

  const SafetensorsReader reader(file);
  expect_same_bits(reader.view("t"), transposed, "t");
  expect_same_bits(reader.view("c"), columns, "c");
  expect_same_bits(reader.view("inner"), inner, "inner");
  EXPECT_EQ(reader.view("t").at<float>({5, 2}), base.at<float>({2, 5}));
  EXPECT_FALSE(raw_header(file).second.contains("__metadata__"));
}

TEST_F(SafetensorsWriter, ReplacesAnExistingFile) {
  const std::string file = path("w.safetensors");
  Tensor first = testing::random_tensor({4}, DType::f32, 1);
  Tensor second = testing::random_tensor({2, 2}, DType::f64, 2);
  write_safetensors(file, {{"a", first}});
  write_safetensors(file, {{"b", second}});
  const SafetensorsReader reader(file);
  EXPECT_EQ(reader.names(), (std::vector<std::string>{"b"}));
  expect_same_bits(reader.view("b"), second, "b");
}

TEST_F(SafetensorsWriter, UnwritableFolderRaisesIoErrorNamingThePath) {
  // A path under a regular file cannot be created, even by root (chmod would not stop root).
  std::ofstream(path("plain_file")) << "x";
  const std::string file = path("plain_file/w.safetensors");
  Tensor t = testing::random_tensor({2}, DType::f32, 1);
  try {
    write_safetensors(file, {{"t", t}});
    ADD_FAILURE() << "no error writing under a regular file";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), file);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsWriter, RejectsDuplicateReservedAndEmptyNames) {
  Tensor t = testing::random_tensor({2}, DType::f32, 1);
  const std::string file = path("bad.safetensors");
  EXPECT_THROW(write_safetensors(file, {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(write_safetensors(file, {{"__metadata__", t}}), Error);
  EXPECT_THROW(write_safetensors(file, {{"", t}}), Error);
  EXPECT_THROW(write_safetensors(file, {{"v", TensorView()}}), Error);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(SafetensorsWriter, HeaderIsWhatHuggingFaceWrites) {
  // HF orders by its Dtype enum, descending (I64 > F64 > F32 > I32 > BF16 > F16 > U8 > BOOL), then
  // by name; serde writes compact JSON, keys in TensorInfo's order; spaces pad to 8 bytes.
  Tensor mask({2}, DType::boolean), f32({1}, DType::f32), i64({1}, DType::i64), f64({1}, DType::f64);
  Tensor bf({1, 1}, DType::bf16), f16({1}, DType::f16), i32({1}, DType::i32), u8({3}, DType::u8);
  const std::string file = path("order.safetensors");
  write_safetensors(file, {{"mask", mask}, {"b_f32", f32}, {"a_f32", f32}, {"i64", i64}, {"f64", f64}, {"bf16", bf},
                           {"f16", f16}, {"i32", i32}, {"u8", u8}, {"q\"\\\n\u00e9", f32}},
                    {{"format", "pt"}});
  std::string expected =
      R"({"__metadata__":{"format":"pt"},)"
      R"("i64":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("f64":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
      R"("a_f32":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
      R"("b_f32":{"dtype":"F32","shape":[1],"data_offsets":[20,24]},)"
      R"("q\"\\\né":{"dtype":"F32","shape":[1],"data_offsets":[24,28]},)"
      R"("i32":{"dtype":"I32","shape":[1],"data_offsets":[28,32]},)"
      R"("bf16":{"dtype":"BF16","shape":[1,1],"data_offsets":[32,34]},)"
      R"("f16":{"dtype":"F16","shape":[1],"data_offsets":[34,36]},)"
      R"("u8":{"dtype":"U8","shape":[3],"data_offsets":[36,39]},)"
      R"("mask":{"dtype":"BOOL","shape":[2],"data_offsets":[39,41]}})";
  expected.append((8 - expected.size() % 8) % 8, ' ');
  const std::string bytes = read_bytes(file);
  EXPECT_EQ(header_length(file), expected.size());
  EXPECT_EQ(bytes.substr(8, expected.size()), expected);
  EXPECT_EQ(bytes.size(), 8 + expected.size() + 41);
}

TEST_F(SafetensorsWriter, RewritesEveryReferenceModelByteForByte) {
  // The reference weights were saved by HF's safetensors with metadata {"format": "pt"}: reading
  // every tensor and writing them again must give the same file.
  const auto dirs = testing::reference_model_dirs();
  ASSERT_GE(dirs.size(), 4u);
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir);
    const SafetensorsReader original(dir + "/model.safetensors");
    ASSERT_EQ(original.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    std::vector<std::pair<std::string, TensorView>> tensors;
    for (const auto& name : original.names()) tensors.emplace_back(name, original.view(name));
    const std::string copy = path("copy.safetensors");
    write_safetensors(copy, tensors, original.metadata());
    const std::string expected = read_bytes(original.path()), actual = read_bytes(copy);
    ASSERT_EQ(actual.size(), expected.size());
    EXPECT_TRUE(actual == expected) << "first difference at byte "
                                    << std::mismatch(actual.begin(), actual.end(), expected.begin()).first -
                                           actual.begin();
  }
}

TEST_F(SafetensorsWriter, DtypeNamesInvertTheReaderMapping) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64, DType::u8,
                      DType::boolean})
    EXPECT_EQ(safetensors_dtype(std::string(safetensors_dtype_name(dtype))), dtype) << dtype_name(dtype);
}

}  // namespace
}  // namespace rf::formats
