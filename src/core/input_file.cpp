#include "core/input_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

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

std::string read_input_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw IoError(path, fmt::format("is {}, not a file to read {} from", special_file_kind(st.st_mode), what));
  const auto too_large = [&] {
    return IoError(path, fmt::format("is larger than {}, the limit for {}: is it the right file?",
                                     describe_bytes(max_bytes), what));
  };
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes) throw too_large();

  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, fmt::format("cannot open: {}", std::strerror(errno)));
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

}  // namespace rf::core
