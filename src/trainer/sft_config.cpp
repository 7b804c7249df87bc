#include "trainer/sft_config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::trainer {

void TrainerConfig::validate() const {
  if (total_training_steps <= 0)
    throw ConfigError("total_training_steps", fmt::format("must be positive, got {}", total_training_steps));
  if (default_local_dir.empty()) throw ConfigError("default_local_dir", "must name a folder");
  if (resume_mode == ResumeMode::resume_path)
    throw ConfigError("resume_mode", "resume_path: expected auto or disable (SFT resumes from its own run folder)");
  if (num_threads < 0) throw ConfigError("num_threads", fmt::format("must be >= 0, got {}", num_threads));
  if (device_memory_budget_gb && !(*device_memory_budget_gb > 0))
    throw ConfigError("device_memory_budget_gb", fmt::format("must be positive (or null), got {}", *device_memory_budget_gb));
}

}  // namespace rf::trainer
