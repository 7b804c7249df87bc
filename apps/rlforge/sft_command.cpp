// `rlforge sft --config FILE [key=value ...]`: reads the YAML config, applies dotted overrides
// (`trainer.total_training_steps=200`, `+a.b=1` adds a key), binds it into the typed SftConfig (errors
// name the key path), and runs the trainer. `rlforge config-docs` prints docs/config.md.
#include <cstdio>

#include "apps/rlforge/commands.h"
#include "apps/rlforge/sft_trainer.h"
#include "config/bind.h"
#include "config/config_tree.h"

namespace rf::apps {

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

Command add_sft_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sft", "supervised fine-tuning / pretraining on a built-in task or JSONL data");
  auto config_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--config", *config_path, "YAML config (e.g. examples/sft_arith.yaml)")->required();
  cmd->add_option("overrides", *overrides, "dotted overrides: trainer.total_training_steps=200, +a.b=1");
  return [config_path, overrides] {
    config::ConfigTree tree = config::ConfigTree::from_file(*config_path);
    tree.apply_overrides(*overrides);
    SftConfig sft = config::bind<SftConfig>(tree.root(), "");
    const SftSummary summary = run_sft(sft, YAML::Dump(config::to_yaml(sft)));
    return summary.steps_run >= 0 ? 0 : 1;
  };
}

Command add_config_docs_command(CLI::App& app) {
  app.add_subcommand("config-docs", "print the config reference (docs/config.md), generated from the config structs");
  return [] {
    std::printf("%s", config::document<SftConfig>("", "`rlforge sft` configuration").c_str());
    return 0;
  };
}

}  // namespace rf::apps
