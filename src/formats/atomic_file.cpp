#include "formats/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace rf::formats {

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(path, fmt::format("cannot create {}: {}", temp, std::strerror(errno)));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += size_t(n);
  }
  const bool ok = written == contents.size() && ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int failure = ok ? errno : error;
    ::unlink(temp.c_str());
    throw IoError(path, fmt::format("cannot write: {}", std::strerror(failure)));
  }
}

}  // namespace rf::formats
