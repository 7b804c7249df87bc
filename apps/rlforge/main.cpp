// rlforge: the command-line entry point. Parses, validates, and runs one subcommand; any error
// becomes one clear message and a non-zero exit (never a crash or a hang).
#include <cstdio>

#include "apps/rlforge/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"rlforge: reinforcement-learning post-training of LLMs on a Megatron-style engine"};
  app.require_subcommand(1);
  const std::vector<std::pair<std::string, rf::apps::Command>> commands = {
      {"info", rf::apps::add_info_command(app)},
      {"sft", rf::apps::add_sft_command(app)},
      {"config-docs", rf::apps::add_config_docs_command(app)},
      {"tokenize", rf::apps::add_tokenize_command(app)},
      {"logprobs", rf::apps::add_logprobs_command(app)},
      {"init-model", rf::apps::add_init_model_command(app)},
      {"convert", rf::apps::add_convert_command(app)},
      {"generate", rf::apps::add_generate_command(app)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& [name, run] : commands)
      if (app.got_subcommand(name)) return run();
  } catch (const rf::Error& e) {
    std::fprintf(stderr, "rlforge: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlforge: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
