// `rlforge info`: what this machine and build will run on (CPU features, the kernel variant picked
// per op, the GEMM engine per dtype and size class with the measurement that chose it, the BLAS and
// oneDNN in use, the thread pool).
#include <cstdio>

#include "apps/rlforge/cli_numbers.h"
#include "apps/rlforge/commands.h"
#include "core/thread_pool.h"
#include "kernels/gemm_choice.h"
#include "kernels/kernel_registry.h"

namespace rf::apps {

Command add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print CPU features, kernel variants, BLAS and threads");
  auto threads = std::make_shared<int>(0);
  auto level = std::make_shared<int>(1);
  add_integer_option(*cmd, "--threads", *threads, "OpenMP threads (0: one per core)", 0, ThreadPool::kMaxThreads);
  add_integer_option(*cmd, "--optimization-level", *level, "0: ref kernels only; 1 or 2: fast kernels", 0, 2);
  return [threads, level] {
    const ThreadPool pool(*threads, "--threads");
    const std::filesystem::path cache = kernels::default_gemm_choice_folder();
    const kernels::GemmChoice choice = kernels::cached_gemm_choice(cache);
    const kernels::KernelRegistry registry(kernels::KernelConfig{
        .optimization_level = *level, .f32_gemm = choice.many_rows, .f32_gemm_few_rows = choice.few_rows});
    std::printf("%s\n%s\nf32 gemm choice (measured once per CPU, cached in %s): %s\n", pool.describe().c_str(),
                registry.describe().c_str(), cache.c_str(), choice.measurements.c_str());
    return 0;
  };
}

}  // namespace rf::apps
