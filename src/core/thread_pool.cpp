#include "core/thread_pool.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/log.h"

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

// OMP_NUM_THREADS's first entry (it may be a list, "4,2": threads per nesting level) when positive, else 0.
long omp_num_threads_env() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (text == nullptr) return 0;
  const long value = std::strtol(text, nullptr, 10);
  return value > 0 ? value : 0;
}

// The threads asked for, capped at the cores; the cap is announced with what asked for more.
int threads_to_use(int num_threads, std::string_view key) {
  const int cores = num_cores();
  const long from_env = num_threads > 0 ? 0 : omp_num_threads_env();
  const long asked = num_threads > 0 ? num_threads : from_env > 0 ? from_env : cores;
  if (asked <= cores) return int(asked);
  core::log_warning("{}: {} threads asked, {} used: this process may run on {} cores (its CPU affinity), and "
                    "more OpenMP threads than cores only take turns on them",
                    num_threads > 0 ? key : std::string_view("OMP_NUM_THREADS"), asked, cores, cores);
  return cores;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::string_view key) : num_threads_(threads_to_use(num_threads, key)) {
  omp_set_dynamic(0);
  omp_set_num_threads(num_threads_);
}

std::string ThreadPool::describe() const {
  return fmt::format("OpenMP pool: {} thread{} ({} cores)", num_threads_, num_threads_ == 1 ? "" : "s",
                     num_cores());
}

}  // namespace rf
