#include "formats/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace rf::formats {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AtomicFile, WritesAndReplacesLeavingNoTempFile) {
  const std::string dir = ::testing::TempDir() + "rf_atomic_file_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/config.yaml";
  write_file_atomically(path, "a: 1\n");
  EXPECT_EQ(read_all(path), "a: 1\n");
  write_file_atomically(path, "b: 2\n");
  EXPECT_EQ(read_all(path), "b: 2\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(AtomicFile, UnwritablePathIsAnIoErrorNamingIt) {
  const std::string file = ::testing::TempDir() + "rf_atomic_file_plain";
  std::ofstream(file) << "x";
  try {
    write_file_atomically(file + "/under_a_file.txt", "x");
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), file + "/under_a_file.txt");
  }
  EXPECT_EQ(read_all(file), "x");  // what was there is untouched
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace rf::formats
