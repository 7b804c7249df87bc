// Console logging: one line per message on stderr, prefixed with the rank label. The level is
// process-wide (it describes the terminal, not a computation).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace rf::core {

enum class LogLevel : int { debug = 0, info = 1, warning = 2, error = 3 };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, std::string_view message);

template <class... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(LogLevel::info)) log_line(LogLevel::info, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void log_warning(fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(LogLevel::warning))
    log_line(LogLevel::warning, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(LogLevel::debug)) log_line(LogLevel::debug, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rf::core
