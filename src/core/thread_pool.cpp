#include "core/thread_pool.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace rf {

int num_cores() {
  // The CPUs this process may run on (taskset, cgroup cpusets, mpirun / Slurm binding), not all of
  // the machine's: a rank bound to 4 of 64 cores must not start 64 threads.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads > 0 ? num_threads : num_cores()) {
  omp_set_dynamic(0);
  omp_set_num_threads(num_threads_);
}

std::string ThreadPool::describe() const {
  return fmt::format("OpenMP pool: {} thread{} ({} cores)", num_threads_, num_threads_ == 1 ? "" : "s",
                     num_cores());
}

}  // namespace rf
