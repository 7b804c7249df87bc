// A fresh folder per test for tests that write files (model folders, checkpoints), and the files of a
// folder by name, to compare two folders byte for byte.
// Not here: what goes into the folders (each layer's fixture writes its own).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace rf::testing {

// An empty folder under gtest's TempDir(), named after the test and the process (tests of one binary
// may run in parallel processes under `ctest -j`), created before each test and removed after it.
class ScratchFolderTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // `name` inside the folder.
  std::string path(const std::string& name) const;

  std::filesystem::path dir_;
};

// Every file directly in `dir` (file name -> contents); a subfolder or an unreadable file is a test failure.
std::map<std::string, std::string> folder_files(const std::string& dir);

}  // namespace rf::testing
