// Test helpers for the safetensors tests: a per-test temp folder, raw and hand-assembled files in
// it, and the check every bad-input test makes (IoError naming the file, with the expected text).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"

namespace rf::testing {

class SafetensorsTempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("rf_{}_{}_{}", test->test_suite_name(), test->name(), ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `bytes` to `name` in the temp folder and returns the path.
  std::string write_raw(const std::string& name, const std::string& bytes) const {
    const std::string file = path(name);
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return file;
  }
  // A safetensors file: the 8-byte length of `header`, the header text, then `data_bytes` bytes
  // 0, 1, 2, ... (all 0 or 1 when `bool_data`).
  std::string write(const std::string& name, const std::string& header, size_t data_bytes,
                    bool bool_data = false) const {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header;
    for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(char(bool_data ? i % 2 : i));
    return write_raw(name, bytes);
  }

  std::filesystem::path dir_;
};

// `open()` throws IoError whose path() is `path` and whose message names it and contains `fragment`.
inline void expect_io_error(const std::function<void()>& open, const std::string& path, const std::string& fragment) {
  try {
    open();
    ADD_FAILURE() << "no error; expected one about " << path << " containing '" << fragment << "'";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), path) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << what;
  }
}

}  // namespace rf::testing
