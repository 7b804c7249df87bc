// read_input_file: a whole small file, or an IoError naming it for anything that is not one to read
// (missing, a folder, a device, over the size cap; a pipe is read up to the cap); describe_bytes.
#include "core/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "support/scratch_folder.h"

namespace rf::core {
namespace {

using InputFile = rf::testing::ScratchFolderTest;

bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// The message of the IoError that reading `path` with `max_bytes` throws ("" when it does not throw).
std::string read_error(const std::string& path, uint64_t max_bytes) {
  try {
    read_input_file(path, max_bytes, "a test file");
  } catch (const IoError& e) {
    EXPECT_EQ(e.path(), path);
    return e.what();
  }
  return "";
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST_F(InputFile, ReadsAWholeFileUpToTheCap) {
  const std::string text(70'000, 'x');  // more than one read chunk
  write(path("a.yaml"), text);
  EXPECT_EQ(read_input_file(path("a.yaml"), text.size(), "a test file"), text);
  EXPECT_TRUE(contains(read_error(path("a.yaml"), text.size() - 1), "is larger than 68.4 KiB, the limit for a test file"))
      << read_error(path("a.yaml"), text.size() - 1);
}

TEST_F(InputFile, RefusesWhatIsNotAFileNamingIt) {
  EXPECT_TRUE(contains(read_error(path("none.yaml"), 100), "cannot open: No such file or directory"));
  EXPECT_TRUE(contains(read_error(dir_.string(), 100), "is a folder, not a file to read a test file from"));
  // Used to be read for ever: /dev/zero has no end and no size.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(contains(read_error("/dev/zero", 1 << 20), "is a character device, not a file to read a test file from"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(InputFile, ReadsAPipeButStopsAtTheCap) {
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { write(fifo, "a: 1\n"); });
  EXPECT_EQ(read_input_file(fifo, 100, "a test file"), "a: 1\n");
  writer.join();

  // A writer that would never stop: the reader gives up one chunk past the cap. The writer then sees
  // EPIPE (SIGPIPE would end the test binary).
  const auto previous = std::signal(SIGPIPE, SIG_IGN);
  std::thread endless([&] {
    std::ofstream out(fifo, std::ios::binary);
    const std::string chunk(4096, 'y');
    while (out << chunk) {
    }
  });
  EXPECT_TRUE(contains(read_error(fifo, 10'000), "is larger than 9.8 KiB"));
  endless.join();  // the reader closed the pipe, so the writer's next write fails
  std::signal(SIGPIPE, previous);
}

std::vector<std::string> lines_of(const std::string& text, uint64_t max_bytes) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  for (int64_t number = 1; read_line(in, line, max_bytes, "in.jsonl", number); ++number) lines.push_back(line);
  return lines;
}

TEST(ReadLine, SplitsAtNewlinesAcrossChunksAndStopsAtTheCap) {
  EXPECT_EQ(lines_of("a\n\nbc\nlast", 100), (std::vector<std::string>{"a", "", "bc", "last"}));
  EXPECT_EQ(lines_of("a\n", 100), (std::vector<std::string>{"a"}));
  EXPECT_EQ(lines_of("", 100), (std::vector<std::string>{}));
  // Lines longer than the 64 KiB read chunk, ending exactly at a chunk edge or not.
  for (const size_t length : {65'534u, 65'535u, 65'536u, 200'000u}) {
    const std::string row(length, 'x');
    EXPECT_EQ(lines_of(row + "\n" + row, 1 << 20), (std::vector<std::string>{row, row})) << length;
  }
  try {
    lines_of("ok\n" + std::string(300'000, 'y') + "\n", 100'000);
    ADD_FAILURE() << "a line over the cap was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("in.jsonl: line 2 is longer than 97.7 KiB, the limit for one line"),
              std::string::npos)
        << e.what();
  }
}

TEST(DescribeBytes, ReadsAsAPersonWouldWriteIt) {
  EXPECT_EQ(describe_bytes(0), "0 bytes");
  EXPECT_EQ(describe_bytes(1023), "1023 bytes");
  EXPECT_EQ(describe_bytes(1024), "1 KiB");
  EXPECT_EQ(describe_bytes(1536), "1.5 KiB");
  EXPECT_EQ(describe_bytes(uint64_t(1) << 20), "1 MiB");
  EXPECT_EQ(describe_bytes(uint64_t(3) << 30), "3 GiB");
}

}  // namespace
}  // namespace rf::core
