// The trainer keys SFT and RL read alike (trainer.logger, trainer.resume_mode), as enums the config binds
// by name.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace rf::trainer {

// trainer.logger: the live console line per step, and metrics.jsonl in the run folder.
enum class Logger : uint8_t { console, jsonl };
constexpr std::array<std::pair<Logger, std::string_view>, 2> enum_names(Logger) {
  return {{{Logger::console, "console"}, {Logger::jsonl, "jsonl"}}};
}

inline bool has_logger(const std::vector<Logger>& loggers, Logger logger) {
  for (Logger l : loggers)
    if (l == logger) return true;
  return false;
}

// trainer.resume_mode: the latest checkpoint of the run folder, none, or trainer.resume_from_path.
enum class ResumeMode : uint8_t { automatic, disable, resume_path };
constexpr std::array<std::pair<ResumeMode, std::string_view>, 3> enum_names(ResumeMode) {
  return {{{ResumeMode::automatic, "auto"}, {ResumeMode::disable, "disable"}, {ResumeMode::resume_path, "resume_path"}}};
}

}  // namespace rf::trainer
