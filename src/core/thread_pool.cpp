#include "core/thread_pool.h"

#include <fmt/format.h>
#include <omp.h>

#include <thread>

namespace rf {

int num_cores() {
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
