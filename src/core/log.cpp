#include "core/log.h"

#include <atomic>
#include <cstdio>

#include "core/error.h"

namespace rf::core {
namespace {

std::atomic<int>& level_storage() {
  static std::atomic<int> level{int(LogLevel::info)};
  return level;
}

}  // namespace

void set_log_level(LogLevel level) { level_storage().store(int(level)); }
bool log_enabled(LogLevel level) { return int(level) >= level_storage().load(std::memory_order_relaxed); }

void log_line(LogLevel level, std::string_view message) {
  const char* tag = level == LogLevel::warning ? "warning: " : level == LogLevel::error ? "error: " : "";
  std::fprintf(stderr, "[%s] %s%.*s\n", rank_label().c_str(), tag, int(message.size()), message.data());
}

}  // namespace rf::core
