// `rlforge info`: what this machine and build will run on (CPU features, the kernel variant picked
// per op, the BLAS and oneDNN in use, the thread pool).
#include <cstdio>

#include "apps/rlforge/commands.h"
#include "core/thread_pool.h"
#include "kernels/kernel_registry.h"

namespace rf::apps {

Command add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print CPU features, kernel variants, BLAS and threads");
  auto threads = std::make_shared<int>(0);
  auto level = std::make_shared<int>(1);
  cmd->add_option("--threads", *threads, "OpenMP threads (0: one per core)");
  cmd->add_option("--optimization-level", *level, "0: ref kernels only; 1: fast kernels");
  return [threads, level] {
    const ThreadPool pool(*threads);
    const kernels::KernelRegistry registry(kernels::KernelConfig{.optimization_level = *level});
    std::printf("%s\n%s\n", pool.describe().c_str(), registry.describe().c_str());
    return 0;
  };
}

}  // namespace rf::apps
