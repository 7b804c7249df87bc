#include "data/data_config.h"

namespace rf::data {

void check_data_source(const std::optional<std::string>& task, const YAML::Node& task_kwargs,
                       const std::optional<config::PathList>& train_files,
                       const std::optional<config::PathList>& val_files) {
  if (train_files && train_files->paths.empty())
    throw ConfigError("train_files", "expected a JSONL file or a list of them, or null for the built-in task");
  if (val_files && val_files->paths.empty())
    throw ConfigError("val_files", "expected a JSONL file or a list of them, or null");
  const bool has_kwargs = task_kwargs.IsDefined() && !task_kwargs.IsNull();
  if (train_files && (task || has_kwargs))
    throw ConfigError(task ? "task" : "task_kwargs",
                      "a built-in task and data.train_files exclude each other: set one of them, the other null");
}

}  // namespace rf::data
