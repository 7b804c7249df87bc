// rlforge: the command-line entry point. Parses, validates, and runs one subcommand; any error on any
// rank becomes one clear message and a non-zero exit of the whole job (never a crash or a hang).
// `--nproc N` re-launches the command as N MPI ranks (nproc_launcher.h).
#include <optional>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include "apps/rlforge/commands.h"
#include "apps/rlforge/nproc_launcher.h"
#include "core/error.h"
#include "dist/guarded_run.h"

namespace {

int run_rlforge(const rf::dist::MpiRuntime& mpi, std::vector<std::string> args) {
  if (const std::optional<int> nproc = rf::apps::take_nproc_option(args)) {
    if (!mpi.active() && *nproc > 1) rf::apps::relaunch_under_mpirun(*nproc, args);
    if (*nproc != mpi.size())
      throw rf::ConfigError("--nproc", fmt::format("{} does not match the {} ranks this job was started with", *nproc,
                                                   mpi.size()));
  }
  CLI::App app{"rlforge: reinforcement-learning post-training of LLMs on a Megatron-style engine"};
  app.footer("Any command takes --nproc N to run as N MPI ranks on this machine (mpirun is started for you).");
  app.require_subcommand(1);
  // A bad option is one `rlforge:` line naming it, like every other error ("--n: expected an integer in
  // [1, 65536], got '0'"); CLI11's default adds a second line after it.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return fmt::format("rlforge: {} (--help lists the options)\n", e.what());
  });
  const std::vector<std::pair<std::string, rf::apps::Command>> commands = {
      {"info", rf::apps::add_info_command(app)},
      {"sft", rf::apps::add_sft_command(app, mpi)},
      {"train", rf::apps::add_train_command(app, mpi)},
      {"config-docs", rf::apps::add_config_docs_command(app)},
      {"tokenize", rf::apps::add_tokenize_command(app)},
      {"logprobs", rf::apps::add_logprobs_command(app)},
      {"init-model", rf::apps::add_init_model_command(app)},
      {"convert", rf::apps::add_convert_command(app)},
      {"generate", rf::apps::add_generate_command(app)},
  };
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments; one of them is enough to print help or the parse error.
    std::ostream silent(nullptr);
    return mpi.rank() == 0 ? app.exit(e) : app.exit(e, silent, silent);
  }
  // The commands that run on several ranks; the others refuse before doing any work.
  const std::set<std::string> multi_rank = {"sft", "train"};
  for (const auto& [name, run] : commands) {
    if (!app.got_subcommand(name)) continue;
    if (mpi.size() > 1 && !multi_rank.contains(name))
      throw rf::Error(fmt::format("[{}] rlforge {} runs on one process only for now, but this job has {} ranks: "
                                  "run it without --nproc or mpirun",
                                  rf::core::rank_label(), name, mpi.size()));
    return run();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const rf::dist::MpiRuntime mpi;  // starts MPI only under mpirun / srun; otherwise a world of one
  return rf::dist::run_guarded(mpi, "rlforge", [&] { return run_rlforge(mpi, std::vector<std::string>(argv, argv + argc)); });
}
