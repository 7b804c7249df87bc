// ThreadPool sets the size of the process's one OpenMP pool; num_cores follows the affinity mask.
#include "core/thread_pool.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/error.h"

namespace rf {
namespace {

// Restores the OpenMP pool size when a test that changes it ends.
class OmpThreadsGuard {
 public:
  OmpThreadsGuard() : saved_(omp_get_max_threads()) {}
  ~OmpThreadsGuard() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(ThreadPool, SetsTheOpenMpPoolSize) {
  const OmpThreadsGuard guard;
  const ThreadPool one(1);
  EXPECT_EQ(one.num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  int team = 0;
#pragma omp parallel
#pragma omp single
  team = omp_get_num_threads();
  EXPECT_EQ(team, 1);
  EXPECT_EQ(one.describe(), fmt::format("OpenMP pool: 1 thread ({} cores)", num_cores()));

  const ThreadPool three(3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(three.describe(), fmt::format("OpenMP pool: 3 threads ({} cores)", num_cores()));

}

// Restores OMP_NUM_THREADS (which CTest sets for every test) when a test that changes it ends.
class OmpNumThreadsEnvGuard {
 public:
  OmpNumThreadsEnvGuard() {
    if (const char* value = std::getenv("OMP_NUM_THREADS")) saved_ = value;
  }
  ~OmpNumThreadsEnvGuard() {
    if (saved_) setenv("OMP_NUM_THREADS", saved_->c_str(), 1);
    else unsetenv("OMP_NUM_THREADS");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(ThreadPool, DefaultIsOmpNumThreadsElseOnePerCore) {
  const OmpThreadsGuard guard;
  const OmpNumThreadsEnvGuard env_guard;
  unsetenv("OMP_NUM_THREADS");
  const ThreadPool all(0);
  EXPECT_EQ(all.num_threads(), num_cores());
  EXPECT_EQ(omp_get_max_threads(), num_cores());
  EXPECT_EQ(ThreadPool(-1).num_threads(), num_cores());

  setenv("OMP_NUM_THREADS", "3", 1);  // as `--nproc` sets it for each rank
  EXPECT_EQ(ThreadPool(0).num_threads(), 3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(ThreadPool(5).num_threads(), 5);  // an explicit count wins
  setenv("OMP_NUM_THREADS", "4,2", 1);
  EXPECT_EQ(ThreadPool(0).num_threads(), 4);
  setenv("OMP_NUM_THREADS", "lots", 1);
  EXPECT_EQ(ThreadPool(0).num_threads(), num_cores());
}

// A count far past the cores used to reach the OpenMP runtime, which crashed starting the threads.
TEST(ThreadPool, RefusesMoreThanMaxThreadsNamingWhereTheCountCameFrom) {
  const OmpThreadsGuard guard;
  const OmpNumThreadsEnvGuard env_guard;
  EXPECT_EQ(ThreadPool(ThreadPool::kMaxThreads).num_threads(), ThreadPool::kMaxThreads);
  try {
    const ThreadPool pool(100000);
    ADD_FAILURE() << "100000 threads were accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "num_threads");
    EXPECT_NE(std::string(e.what()).find("100000 OpenMP threads is more than the 4096 allowed"), std::string::npos)
        << e.what();
  }
  setenv("OMP_NUM_THREADS", "100000", 1);
  try {
    const ThreadPool pool(0);
    ADD_FAILURE() << "OMP_NUM_THREADS=100000 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "OMP_NUM_THREADS");
  }
}

TEST(ThreadPool, NumCoresFollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(num_cores(), CPU_COUNT(&saved));
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t just_one;
  CPU_ZERO(&just_one);
  CPU_SET(first, &just_one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(just_one), &just_one), 0);
  const int bound = num_cores();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(bound, 1);
}

}  // namespace
}  // namespace rf
