#include "apps/rlforge/nproc_launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace rf::apps {
namespace {

int parse_nproc(const std::string& text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1)
    throw ConfigError("--nproc", fmt::format("expected a positive number of processes, got '{}'", text));
  return n;
}

// The command that runs `args` as `nproc` ranks.
std::vector<std::string> mpirun_command(int nproc, const std::vector<std::string>& args, bool as_root) {
  std::vector<std::string> command = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none"};
  if (as_root) command.push_back("--allow-run-as-root");
  // This very binary, wherever it was started from (argv[0] may be a bare name found on PATH).
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  command.push_back(ec ? args.front() : self.string());
  command.insert(command.end(), args.begin() + 1, args.end());
  return command;
}

}  // namespace

std::optional<int> take_nproc_option(std::vector<std::string>& args) {
  std::optional<int> nproc;
  for (size_t i = 1; i < args.size();) {
    if (args[i] == "--nproc") {
      if (i + 1 == args.size()) throw ConfigError("--nproc", "expected a number of processes after it");
      nproc = parse_nproc(args[i + 1]);
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
    } else if (args[i].starts_with("--nproc=")) {
      nproc = parse_nproc(args[i].substr(std::strlen("--nproc=")));
      args.erase(args.begin() + long(i));
    } else {
      ++i;
    }
  }
  return nproc;
}

void relaunch_under_mpirun(int nproc, const std::vector<std::string>& args) {
  const int cores = num_cores();
  // Said before anything starts: an oversubscribed job is not hung, only slow from its first second on
  // (MPI's start-up, every rank's model and kernel set-up, then every step).
  if (nproc > cores)
    core::log_warning("--nproc {}: {} ranks on {} cores ({:.1f}x oversubscribed): the ranks take turns on the "
                      "cores, one thread each, so start-up and every step run about {:.0f}x slower than {} ranks "
                      "would; nothing is printed until the ranks have started",
                      nproc, nproc, cores, double(nproc) / cores, std::ceil(double(nproc) / cores), cores);
  // The ranks, all on this machine, inherit mpirun's environment and so this variable.
  const char* threads = std::getenv("OMP_NUM_THREADS");
  if (threads == nullptr || *threads == '\0')
    setenv("OMP_NUM_THREADS", std::to_string(std::max(1, cores / nproc)).c_str(), 1);
  const std::vector<std::string> command = mpirun_command(nproc, args, geteuid() == 0);
  std::string shown;
  for (const std::string& word : command) shown += (shown.empty() ? "" : " ") + word;
  core::log_info("--nproc {}: {} (OMP_NUM_THREADS={})", nproc, shown, std::getenv("OMP_NUM_THREADS"));
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw Error(fmt::format("--nproc {}: could not run mpirun ({}); install Open MPI (scripts/install-deps.sh) or "
                          "start the ranks with your own launcher",
                          nproc, std::strerror(errno)));
}

}  // namespace rf::apps
