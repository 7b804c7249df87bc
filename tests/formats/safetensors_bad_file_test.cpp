// Hand-made bad safetensors files, one test per way a file can be wrong (the rules are listed in
// formats/safetensors_format.h). Each must raise IoError whose message names the file, the tensor
// when one is at fault, and the problem; none may crash or read outside the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "formats/safetensors_reader.h"
#include "formats/safetensors_test_files.h"

namespace rf::formats {
namespace {

class SafetensorsBadFile : public testing::SafetensorsTempDir {
 protected:
  // Writes a file of `header` and `data_bytes` data bytes and expects opening it to fail with `fragment`.
  void expect_refused(const std::string& header, size_t data_bytes, const std::string& fragment) {
    const std::string file = write(fmt::format("bad_{}.safetensors", num_files_++), header, data_bytes);
    expect_refused_file(file, fragment);
  }
  static void expect_refused_file(const std::string& file, const std::string& fragment) {
    testing::expect_io_error([&] { const SafetensorsReader reader(file); }, file, fragment);
  }

  int num_files_ = 0;
};

// One F32 tensor "w" of `shape` at `offsets`.
std::string f32_entry(const std::string& shape, const std::string& offsets) {
  return fmt::format(R"({{"w": {{"dtype": "F32", "shape": {}, "data_offsets": {}}}}})", shape, offsets);
}

TEST_F(SafetensorsBadFile, MissingFile) {
  expect_refused_file(path("absent.safetensors"), "cannot open");
}

TEST_F(SafetensorsBadFile, FewerThanEightBytes) {
  expect_refused_file(write_raw("short.safetensors", "abc"), "3 bytes: too short for a safetensors header");
  expect_refused_file(write_raw("empty.safetensors", ""), "0 bytes: too short");
}

TEST_F(SafetensorsBadFile, HeaderLengthBeyondTheFile) {
  std::string bytes(8, '\0');
  const uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  expect_refused_file(write_raw("long_header.safetensors", bytes + "{}"), "header length 1000 exceeds the file size 10");
}

TEST_F(SafetensorsBadFile, HeaderLengthOverTheCap) {
  // Refused before the file size is even compared: a length near 2^64 would wrap if added to 8.
  for (const uint64_t n : {kMaxSafetensorsHeaderBytes + 1, ~uint64_t(0)}) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &n, 8);
    expect_refused_file(write_raw("huge_header.safetensors", bytes + "{}"),
                        fmt::format("header length {} exceeds the cap of 100000000 bytes", n));
  }
}

TEST_F(SafetensorsBadFile, MalformedJson) {
  expect_refused(R"({"w": {"dtype": "F32",)", 0, "header is not valid JSON: [json.exception.parse_error");
}

TEST_F(SafetensorsBadFile, NonUtf8Header) {
  expect_refused("{\"w\xff\": {}}", 0, "header is not valid JSON");
}

TEST_F(SafetensorsBadFile, TextAfterTheJson) {
  // Spaces are the writers' padding; anything else after the object is not.
  expect_refused("{}  x", 0, "header is not valid JSON");
  expect_refused(std::string("{}\0\0\0\0\0\0", 8), 0, "header is not valid JSON: a NUL byte at offset 2");
}

TEST_F(SafetensorsBadFile, HeaderNotAnObject) {
  expect_refused("[1, 2]", 0, "header is not a JSON object but an array");
  expect_refused("\"text\"", 0, "header is not a JSON object but \"text\"");
}

TEST_F(SafetensorsBadFile, DuplicateName) {
  expect_refused(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                 R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                 2, "header names tensor 'w' twice");
}

TEST_F(SafetensorsBadFile, MetadataNotAnObjectOfStrings) {
  expect_refused(R"({"__metadata__": ["pt"]})", 0, "__metadata__ is an array, not an object of strings");
  expect_refused(R"({"__metadata__": {"step": 12}})", 0, "__metadata__ 'step' is 12, not a string");
}

TEST_F(SafetensorsBadFile, EntryNotAnObject) {
  expect_refused(R"({"w": 5})", 0, "tensor 'w': the entry is 5, not an object");
  // A deeply nested value is described, never printed in full (printing it would recurse).
  expect_refused("{\"w\": " + std::string(100000, '[') + std::string(100000, ']') + "}", 0,
                 "tensor 'w': the entry is an array, not an object");
}

TEST_F(SafetensorsBadFile, MissingKey) {
  expect_refused(R"({"w": {"dtype": "F32", "shape": [1]}})", 4, "tensor 'w': no \"data_offsets\"");
  expect_refused(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4, "tensor 'w': no \"dtype\"");
  expect_refused(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "tensor 'w': no \"shape\"");
}

TEST_F(SafetensorsBadFile, UnknownDtype) {
  expect_refused(R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}})", 2,
                 "tensor 'w': unsupported safetensors dtype \"Q4\": expected F32, BF16");
  // HF knows I8 and the FP8 types; rlforge has no DType for them.
  expect_refused(R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2,
                 "unsupported safetensors dtype \"F8_E4M3\"");
  expect_refused(R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", 8,
                 "tensor 'w': \"dtype\" is 4, not a string");
}

TEST_F(SafetensorsBadFile, ShapeNotAnArrayOfCounts) {
  expect_refused(f32_entry("4", "[0, 16]"), 16, "tensor 'w': \"shape\" is 4, not an array");
  expect_refused(f32_entry("[-1, 4]", "[0, 16]"), 16, "tensor 'w': \"shape\" holds -1, not a non-negative integer");
  expect_refused(f32_entry("[2.0]", "[0, 8]"), 8, "tensor 'w': \"shape\" holds 2.0, not a non-negative integer");
  expect_refused(f32_entry("[\"2\"]", "[0, 8]"), 8, "tensor 'w': \"shape\" holds \"2\", not a non-negative integer");
}

TEST_F(SafetensorsBadFile, MoreDimensionsThanSupported) {
  expect_refused(f32_entry("[1, 1, 1, 1, 1, 1, 1]", "[0, 4]"), 4,
                 "tensor 'w': \"shape\" has 7 dimensions; rlforge tensors have at most 6");
}

TEST_F(SafetensorsBadFile, ShapeProductOverflows) {
  // 2^32 x 2^32 x 4 bytes wraps to 0, which would match the empty range without the check.
  expect_refused(f32_entry("[4294967296, 4294967296]", "[0, 0]"), 0,
                 "tensor 'w': shape [4294967296, 4294967296] of F32 overflows");
  // A zero extent does not excuse the others: numel and strides are computed without it too.
  expect_refused(f32_entry("[0, 4611686018427387904, 4]", "[0, 0]"), 0, "overflows");
  // One extent beyond int64.
  expect_refused(R"({"w": {"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 0]}})", 0,
                 "tensor 'w': shape [9223372036854775808] of U8 overflows");
}

TEST_F(SafetensorsBadFile, DataOffsetsNotTwoCounts) {
  expect_refused(f32_entry("[1]", "4"), 4, "tensor 'w': \"data_offsets\" is 4, not an array [begin, end]");
  expect_refused(f32_entry("[1]", "[0, 4, 8]"), 8, "tensor 'w': \"data_offsets\" has 3 entries, expected 2");
  expect_refused(f32_entry("[1]", "[4]"), 4, "tensor 'w': \"data_offsets\" has 1 entries, expected 2");
  expect_refused(f32_entry("[1]", "[-4, 0]"), 4, "tensor 'w': \"data_offsets\" holds -4, not a non-negative integer");
  expect_refused(f32_entry("[1]", "[0, 4.5]"), 4, "tensor 'w': \"data_offsets\" holds 4.5, not a non-negative integer");
}

TEST_F(SafetensorsBadFile, DataOffsetsBackwards) {
  expect_refused(f32_entry("[0]", "[8, 4]"), 12, "tensor 'w': data_offsets [8, 4) end before they begin");
}

TEST_F(SafetensorsBadFile, DataOffsetsPastTheEnd) {
  expect_refused(f32_entry("[4]", "[0, 16]"), 12, "tensor 'w': data_offsets [0, 16) outside the 12 data bytes");
  expect_refused(f32_entry("[1]", "[18446744073709551612, 18446744073709551616]"), 4,
                 "\"data_offsets\" holds 1.8446744073709552e+19");  // past 2^64: a float to JSON
}

TEST_F(SafetensorsBadFile, ByteCountNotMatchingShape) {
  expect_refused(f32_entry("[2, 3]", "[0, 20]"), 24,
                 "tensor 'w': data_offsets [0, 20) hold 20 bytes, but shape [2, 3] of F32 needs 24");
  expect_refused(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 24]}})", 24,
                 "data_offsets [0, 24) hold 24 bytes, but shape [2, 3] of BF16 needs 12");
}

TEST_F(SafetensorsBadFile, HoleBetweenTensors) {
  expect_refused(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                 R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                 12, "tensor 'b': data_offsets [8, 12) leave bytes [4, 8) of the data section unused");
}

TEST_F(SafetensorsBadFile, DataNotStartingAtZero) {
  expect_refused(f32_entry("[1]", "[4, 8]"), 8, "tensor 'w': data_offsets [4, 8) leave bytes [0, 4)");
}

TEST_F(SafetensorsBadFile, OverlappingTensors) {
  expect_refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                 R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                 12, "tensor 'b': data_offsets [4, 12) overlap tensor 'a' at [0, 8)");
  // Two names for the same bytes are an overlap too.
  expect_refused(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                 R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                 4, "tensor 'b': data_offsets [0, 4) overlap tensor 'a' at [0, 4)");
  // An empty tensor inside another's range as well (HF refuses it the same way).
  expect_refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                 R"( "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                 8, "tensor 'e': data_offsets [4, 4) overlap tensor 'a'");
}

TEST_F(SafetensorsBadFile, TrailingBytesAfterTheLastTensor) {
  expect_refused(f32_entry("[1]", "[0, 4]"), 8,
                 "the tensors cover bytes [0, 4) of the 8-byte data section: 4 trailing bytes");
  expect_refused("{}", 3, "the tensors cover bytes [0, 0) of the 3-byte data section: 3 trailing bytes");
}

TEST_F(SafetensorsBadFile, BoolByteNotZeroOrOne) {
  // Data bytes are 0, 1, 2, ...: element 2 of the mask is the byte 2.
  expect_refused(R"({"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}})", 4,
                 "tensor 'm': BOOL element 2 is the byte 2, not 0 or 1");
  const std::string ok = write("mask.safetensors", R"({"m": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}})",
                               4, /*bool_data=*/true);
  EXPECT_EQ(SafetensorsReader(ok).view("m").at<bool>({1}), true);
}

// The fuzzer's seeds are what their names say: valid_* open, bad_* are refused with an IoError.
TEST(SafetensorsFuzzSeeds, ValidOpenAndBadAreRefused) {
  int num_valid = 0, num_bad = 0;
  for (const auto& item : std::filesystem::directory_iterator(RF_FUZZ_CORPUS_DIR)) {
    const std::string file = item.path().string(), name = item.path().filename().string();
    SCOPED_TRACE(name);
    if (name.starts_with("valid_")) {
      const SafetensorsReader reader(file);
      for (const std::string& tensor : reader.names()) {
        const SafetensorsEntry& e = reader.entry(tensor);
        EXPECT_EQ(reader.read(tensor, e.dtype).nbytes(), e.end - e.begin);
      }
      ++num_valid;
    } else {
      ASSERT_TRUE(name.starts_with("bad_"));
      EXPECT_THROW(const SafetensorsReader reader(file), IoError);
      ++num_bad;
    }
  }
  EXPECT_GE(num_valid, 5);
  EXPECT_GE(num_bad, 15);
}

}  // namespace
}  // namespace rf::formats
