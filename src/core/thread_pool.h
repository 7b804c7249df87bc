// ThreadPool: owns the configuration of the process's one OpenMP pool (DESIGN §9). Kernels
// parallelise with OpenMP inside it; OpenBLAS (OpenMP build) and oneDNN (OpenMP runtime) share
// the same threads, so nothing oversubscribes the cores. Create one in `main`, pass it down.
#pragma once

#include <string>
#include <string_view>

namespace rf {

class ThreadPool {
 public:
  // The most a command-line option accepts: a count past it is a typo, refused by name at parsing.
  static constexpr int kMaxThreads = 4096;

  // num_threads <= 0 means OMP_NUM_THREADS when it is set to a positive number (what `--nproc N` sets
  // to cores / N per rank, or the user exported), else one per core (see num_cores). A count above the
  // cores is capped there, with a warning naming where it came from (`key`, e.g. "trainer.num_threads",
  // or OMP_NUM_THREADS), the count asked and the count used: more OpenMP threads than cores only take
  // turns on them, and a count libgomp cannot start (100000) crashes it.
  ThreadPool(int num_threads, std::string_view key);
  int num_threads() const { return num_threads_; }
  std::string describe() const;  // "OpenMP pool: 2 threads (2 cores)"

 private:
  int num_threads_;
};

// Cores this process may run on: its CPU affinity mask, which mpirun / Slurm binding narrows.
int num_cores();

}  // namespace rf
