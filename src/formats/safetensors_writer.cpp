#include "formats/safetensors_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/tensor.h"

namespace rf::formats {
namespace {

// The format stores little-endian values; writing memory as it is is only right on such a host.
static_assert(std::endian::native == std::endian::little, "safetensors writing assumes a little-endian host");

// Owns the descriptor of the temp file until the file is complete; on failure the temp file is removed.
class TempFile {
 public:
  TempFile(std::string final_path, std::string temp_path)
      : final_path_(std::move(final_path)), temp_path_(std::move(temp_path)) {
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(fmt::format("cannot create {}", temp_path_));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(temp_path_.c_str());
  }

  void write(const void* data, size_t size) {
    const auto* bytes = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      // write() may write less than asked (it stops at 2 GiB per call on Linux, or on a signal).
      const ssize_t n = ::write(fd_, bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(fmt::format("writing {} failed at byte {}", temp_path_, written_ + done));
      done += size_t(n);
    }
    written_ += size;
  }

  // fsync before rename: otherwise a crash can leave the final name pointing at missing data.
  void sync_and_rename() {
    if (::fsync(fd_) != 0) fail(fmt::format("cannot fsync {}", temp_path_));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(fmt::format("cannot close {}", temp_path_));
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
      fail(fmt::format("cannot rename {} to the final name", temp_path_));
    renamed_ = true;
    // The rename itself is durable only once the folder holding the entry is synced.
    const std::filesystem::path parent = std::filesystem::path(final_path_).parent_path();
    const std::string folder = parent.empty() ? std::string(".") : parent.string();
    const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) fail(fmt::format("cannot open folder {} to fsync it", folder));
    const bool synced = ::fsync(dir_fd) == 0;
    const int err = errno;
    ::close(dir_fd);
    errno = err;
    if (!synced) fail(fmt::format("cannot fsync folder {}", folder));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw IoError(final_path_, fmt::format("{}: {}", what, std::strerror(errno)));
  }

  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  size_t written_ = 0;
  bool renamed_ = false;
};

// The rank of a dtype in Hugging Face's Dtype enum (safetensors tensor.rs), whose writer orders
// tensors by it, descending, then by name. Element sizes never increase along that order, so every
// tensor stays aligned to its element size with no gap between tensors (the format forbids holes).
int hf_dtype_rank(DType dtype) {
  switch (dtype) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::f16: return 2;
    case DType::bf16: return 3;
    case DType::i32: return 4;
    case DType::f32: return 5;
    case DType::f64: return 6;
    case DType::i64: return 7;
  }
  return 0;
}

// The JSON text serde_json writes for HF's header: compact, "__metadata__" first, the entries in
// file order with their keys as TensorInfo declares them (dtype, shape, data_offsets).
std::string header_text(const std::vector<std::pair<std::string, TensorView>>& tensors,
                        const std::vector<size_t>& order, const std::map<std::string, std::string>& metadata) {
  std::string text = "{";
  if (!metadata.empty()) text += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  size_t offset = 0;
  for (size_t i : order) {
    const auto& [name, view] = tensors[i];
    if (text.size() > 1) text += ',';
    text += fmt::format(R"({}:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", nlohmann::json(name).dump(),
                        safetensors_dtype_name(view.dtype()), fmt::join(view.shape(), ","), offset,
                        offset + view.nbytes());
    offset += view.nbytes();
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const auto& [name, view] : tensors) {
    RF_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", path, name);
    RF_CHECK(seen.insert(name).second, "{}: tensor '{}' given twice", path, name);
    RF_CHECK(!view.empty(), "{}: tensor '{}' is an empty view", path, name);
  }

  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int rank_a = hf_dtype_rank(tensors[a].second.dtype()), rank_b = hf_dtype_rank(tensors[b].second.dtype());
    return rank_a != rank_b ? rank_a > rank_b : tensors[a].first < tensors[b].first;
  });
  std::string header;
  try {
    header = header_text(tensors, order, metadata);
  } catch (const nlohmann::json::type_error& e) {  // JSON strings must be UTF-8, so HF's names are too
    RF_CHECK(false, "{}: a tensor name or metadata string is not valid UTF-8: {}", path, e.what());
  }
  // HF's reader refuses a longer header, so such a file would be unreadable everywhere.
  RF_CHECK(header.size() <= kMaxSafetensorsHeaderBytes,
           "{}: the header of {} tensors takes {} bytes, over the cap of {}", path, tensors.size(), header.size(),
           kMaxSafetensorsHeaderBytes);
  const uint64_t header_size = header.size();

  TempFile file(path, path + ".tmp");
  file.write(&header_size, sizeof(header_size));
  file.write(header.data(), header.size());
  for (size_t i : order) {
    const TensorView view = tensors[i].second;
    if (view.numel() == 0) continue;
    if (view.is_contiguous()) {
      file.write(view.raw(), view.nbytes());
    } else {
      const Tensor packed = clone(view, view.dtype());
      file.write(packed.view().raw(), packed.nbytes());
    }
  }
  file.sync_and_rename();
}

}  // namespace rf::formats
