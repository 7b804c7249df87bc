#include "core/thread_pool.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace rf {

int num_cores() {
  // The CPUs this process may run on (taskset, cgroup cpusets, mpirun / Slurm binding), not all of
  // the machine's: a rank bound to 4 of 64 cores must not start 64 threads.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

namespace {

int default_num_threads() {
  // OMP_NUM_THREADS may be a list ("4,2": threads per nesting level); the first entry is ours.
  const char* text = std::getenv("OMP_NUM_THREADS");
  const int from_env = text != nullptr ? std::atoi(text) : 0;
  return from_env > 0 ? from_env : num_cores();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads > 0 ? num_threads : default_num_threads()) {
  // Tens of thousands of threads crash the OpenMP runtime when it starts them (a segfault, no message).
  if (num_threads_ > kMaxThreads)
    throw ConfigError(num_threads > 0 ? "num_threads" : "OMP_NUM_THREADS",
                      fmt::format("{} OpenMP threads is more than the {} allowed (this process may run on {} cores)",
                                  num_threads_, kMaxThreads, num_cores()));
  omp_set_dynamic(0);
  omp_set_num_threads(num_threads_);
}

std::string ThreadPool::describe() const {
  return fmt::format("OpenMP pool: {} thread{} ({} cores)", num_threads_, num_threads_ == 1 ? "" : "s",
                     num_cores());
}

}  // namespace rf
