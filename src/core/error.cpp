#include "core/error.h"

#include <cstring>

namespace rf {
namespace {

std::string& mutable_rank_label() {
  static std::string label = "rank 0";
  return label;
}

}  // namespace

ConfigError::ConfigError(std::string key_path, const std::string& what_expected)
    : Error(fmt::format("[{}] config error: {}: {}", core::rank_label(), key_path, what_expected)),
      key_path_(std::move(key_path)),
      detail_(what_expected) {}

IoError::IoError(std::string path, const std::string& what_went_wrong)
    : Error(fmt::format("[{}] I/O error: {}: {}", core::rank_label(), path, what_went_wrong)),
      path_(std::move(path)),
      detail_(what_went_wrong) {}

namespace core {

const std::string& rank_label() { return mutable_rank_label(); }
void set_rank_label(std::string label) { mutable_rank_label() = std::move(label); }

void throw_check_failure(const char* file, int line, const char* condition,
                         const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw CheckFailure(fmt::format("[{}] {}:{}: {} (check `{}` failed)", rank_label(),
                          base ? base + 1 : file, line, message, condition));
}

}  // namespace core
}  // namespace rf
