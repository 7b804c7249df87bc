#include "trainer/sft_config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::trainer {

void TrainerConfig::validate() const {
  if (total_training_steps <= 0)
    throw ConfigError("total_training_steps", fmt::format("must be positive, got {}", total_training_steps));
  if (default_local_dir.empty()) throw ConfigError("default_local_dir", "must name a folder");
  for (const std::string& name : logger)
    if (name != "console" && name != "jsonl")
      throw ConfigError("logger", fmt::format("unknown logger '{}': expected console or jsonl", name));
  if (resume_mode != "auto" && resume_mode != "disable")
    throw ConfigError("resume_mode", fmt::format("'{}': expected auto or disable", resume_mode));
  if (num_threads < 0) throw ConfigError("num_threads", fmt::format("must be >= 0, got {}", num_threads));
}

}  // namespace rf::trainer
