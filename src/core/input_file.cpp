#include "core/input_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace rf::core {
namespace {

// What a file that is neither regular nor a pipe is, for the message.
const char* special_file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string describe_bytes(uint64_t num_bytes) {
  constexpr uint64_t kKiB = 1024;
  if (num_bytes < kKiB) return fmt::format("{} bytes", num_bytes);
  const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = double(num_bytes) / double(kKiB);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return value == double(uint64_t(value)) ? fmt::format("{} {}", uint64_t(value), units[unit])
                                          : fmt::format("{:.1f} {}", value, units[unit]);
}

std::ifstream open_input_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw IoError(path, fmt::format("is {}, not a file to read {} from", special_file_kind(st.st_mode), what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  return in;
}

std::string read_input_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  std::ifstream in = open_input_file(path, what);
  const auto too_large = [&] {
    return IoError(path, fmt::format("is larger than {}, the limit for {}: is it the right file?",
                                     describe_bytes(max_bytes), what));
  };
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);  // fails for a pipe: it is read to the cap
  if (!error && size > max_bytes) throw too_large();
  // Read in chunks up to one byte past the cap: a pipe has no size to check first, and a regular file
  // may grow while it is read.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    if (text.size() > max_bytes) throw too_large();
  }
  if (in.bad()) throw IoError(path, fmt::format("read failed: {}", std::strerror(errno)));
  return text;
}

bool read_line(std::istream& in, std::string& line, uint64_t max_bytes, const std::string& path, int64_t line_number) {
  // getline into a fixed buffer, so that a file without newlines (or /dev/zero through a pipe) is cut
  // at the cap instead of growing one string until memory runs out.
  line.clear();
  char chunk[1 << 16];
  bool got_any = false;
  while (true) {
    in.getline(chunk, sizeof(chunk));
    const auto count = size_t(in.gcount());
    const bool chunk_full = in.fail() && !in.eof() && count == sizeof(chunk) - 1;  // no '\n' yet
    const bool newline = !in.fail() && !in.eof();
    line.append(chunk, newline ? count - 1 : count);  // gcount counts the '\n' it consumed
    got_any = got_any || count > 0;
    if (line.size() > max_bytes)
      throw IoError(path, fmt::format("line {} is longer than {}, the limit for one line: is it the right file?",
                                      line_number, describe_bytes(max_bytes)));
    if (!chunk_full) break;
    in.clear();
  }
  if (in.bad()) throw IoError(path, fmt::format("line {}: read failed: {}", line_number, std::strerror(errno)));
  return got_any;
}

}  // namespace rf::core
