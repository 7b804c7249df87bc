// ThreadPool: owns the configuration of the process's one OpenMP pool (DESIGN §9). Kernels
// parallelise with OpenMP inside it; OpenBLAS (OpenMP build) and oneDNN (OpenMP runtime) share
// the same threads, so nothing oversubscribes the cores. Create one in `main`, pass it down.
#pragma once

#include <string>

namespace rf {

class ThreadPool {
 public:
  static constexpr int kMaxThreads = 4096;

  // num_threads <= 0 means OMP_NUM_THREADS when it is set to a positive number (what `--nproc N` sets
  // to cores / N per rank, or the user exported), else one per core (see num_cores). More than
  // kMaxThreads is a ConfigError ("num_threads", or "OMP_NUM_THREADS" when the count came from it).
  explicit ThreadPool(int num_threads);
  int num_threads() const { return num_threads_; }
  std::string describe() const;  // "OpenMP pool: 2 threads (2 cores)"

 private:
  int num_threads_;
};

// Cores this process may run on: its CPU affinity mask, which mpirun / Slurm binding narrows.
int num_cores();

}  // namespace rf
