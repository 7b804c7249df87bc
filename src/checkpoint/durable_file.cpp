#include "checkpoint/durable_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace rf::checkpoint {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IoError(path, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

void write_file_synced(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail(path, fmt::format("write failed at byte {}", done));
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail(path, "cannot fsync");
  }
  if (::close(fd) != 0) fail(path, "cannot close");
}

void sync_folder(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open folder to fsync it");
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  errno = err;
  if (!synced) fail(path, "cannot fsync folder");
}

void rename_path(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail(to, fmt::format("cannot rename {} to it", from));
}

std::string replace_folder(const std::string& from, const std::string& to, const std::string& aside) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) return from;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) fail(to, fmt::format("cannot swap {} with it", from));
  rename_path(to, aside);
  rename_path(from, to);
  return aside;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(path, "read failed");
  return text.str();
}

}  // namespace rf::checkpoint
