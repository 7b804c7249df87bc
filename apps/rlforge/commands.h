// The `rlforge` subcommands. Each registers its options on the CLI app and returns the function
// that runs it; `main` parses, then runs the chosen one inside one guarded try block.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "dist/mpi_runtime.h"

namespace rf::apps {

using Command = std::function<int()>;

Command add_info_command(CLI::App& app);
// Runs on every rank of `mpi`'s world (the parallel layout comes from its megatron config).
Command add_sft_command(CLI::App& app, const dist::MpiRuntime& mpi);
// `rlforge train`: RL post-training; runs on every rank of `mpi`'s world, like sft.
Command add_train_command(CLI::App& app, const dist::MpiRuntime& mpi);
Command add_config_docs_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_logprobs_command(CLI::App& app);
Command add_init_model_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_generate_command(CLI::App& app);

}  // namespace rf::apps
