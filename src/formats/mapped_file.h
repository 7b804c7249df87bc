// MappedFile: a read-only memory map of a whole file (RAII). Throws IoError naming the path.
#pragma once

#include <cstddef>
#include <string>

namespace rf::formats {

class MappedFile {
 public:
  explicit MappedFile(std::string path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rf::formats
