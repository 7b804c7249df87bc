// Small helpers shared by the model commands (init-model, convert, logprobs, generate).
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "core/error.h"

namespace rf::apps {

// Refuses to write into a folder that holds anything, so a new model or checkpoint never mixes with
// old files and nothing already saved is overwritten. `option` names the flag in the error.
inline void require_new_folder(const std::string& dir, const char* option) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return;
  if (!std::filesystem::is_directory(dir, ec)) throw IoError(dir, fmt::format("{}: exists and is not a folder", option));
  if (!std::filesystem::is_empty(dir, ec))
    throw IoError(dir, fmt::format("{}: the folder is not empty; give a new one", option));
}

}  // namespace rf::apps
