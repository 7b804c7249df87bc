#include "support/scratch_folder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace rf::testing {

namespace fs = std::filesystem;

void ScratchFolderTest::SetUp() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = fs::path(::testing::TempDir()) / fmt::format("rf_{}_{}_{}", test->test_suite_name(), test->name(), ::getpid());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void ScratchFolderTest::TearDown() { fs::remove_all(dir_); }

std::string ScratchFolderTest::path(const std::string& name) const { return (dir_ / name).string(); }

std::map<std::string, std::string> folder_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& item : fs::directory_iterator(dir)) {
    std::ifstream in(item.path(), std::ios::binary);
    if (!item.is_regular_file() || !in) {
      ADD_FAILURE() << item.path() << ": not a readable file";
      continue;
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files[item.path().filename().string()] = bytes.str();
  }
  return files;
}

}  // namespace rf::testing
