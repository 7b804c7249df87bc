// ThreadPool sets the size of the process's one OpenMP pool, capped at the cores; num_cores follows the affinity mask.
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

// The team an OpenMP parallel region starts now.
int team_size() {
  int team = 0;
#pragma omp parallel
#pragma omp single
  team = omp_get_num_threads();
  return team;
}

// The first core of `cores` alone: the affinity a binding launcher may give a rank.
cpu_set_t first_core_of(const cpu_set_t& cores) {
  int first = 0;
  while (!CPU_ISSET(first, &cores)) ++first;
  cpu_set_t just_one;
  CPU_ZERO(&just_one);
  CPU_SET(first, &just_one);
  return just_one;
}

TEST(ThreadPool, SetsTheOpenMpPoolSize) {
  const OmpThreadsGuard guard;
  const ThreadPool one(1, "test.num_threads");
  EXPECT_EQ(one.num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(team_size(), 1);
  EXPECT_EQ(one.describe(), fmt::format("OpenMP pool: 1 thread ({} cores)", num_cores()));

  const ThreadPool all(num_cores(), "test.num_threads");
  EXPECT_EQ(omp_get_max_threads(), num_cores());
  EXPECT_EQ(all.describe(), fmt::format("OpenMP pool: {} thread{} ({} cores)", num_cores(),
                                        num_cores() == 1 ? "" : "s", num_cores()));
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
  const ThreadPool all(0, "test.num_threads");
  EXPECT_EQ(all.num_threads(), num_cores());
  EXPECT_EQ(omp_get_max_threads(), num_cores());
  EXPECT_EQ(ThreadPool(-1, "test.num_threads").num_threads(), num_cores());

  setenv("OMP_NUM_THREADS", "1", 1);  // as `--nproc` sets it for each rank
  EXPECT_EQ(ThreadPool(0, "test.num_threads").num_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  EXPECT_EQ(ThreadPool(num_cores(), "test.num_threads").num_threads(), num_cores());  // an explicit count wins
  setenv("OMP_NUM_THREADS", "1,2", 1);
  EXPECT_EQ(ThreadPool(0, "test.num_threads").num_threads(), 1);
  setenv("OMP_NUM_THREADS", "lots", 1);
  EXPECT_EQ(ThreadPool(0, "test.num_threads").num_threads(), num_cores());
}

// trainer.num_threads=100000 crashed libgomp: a count above the cores is capped there, with a warning
// naming where it came from, the count asked and the count used.
TEST(ThreadPool, CapsAtTheCoresNamingWhereTheCountCameFrom) {
  const OmpThreadsGuard guard;
  const OmpNumThreadsEnvGuard env_guard;
  ::testing::internal::CaptureStderr();
  const ThreadPool many(100000, "trainer.num_threads");
  EXPECT_EQ(many.num_threads(), num_cores());
  EXPECT_EQ(team_size(), num_cores());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find(fmt::format("warning: trainer.num_threads: 100000 threads asked, {} used: this process "
                                     "may run on {} cores",
                                     num_cores(), num_cores())),
            std::string::npos)
      << warning;

  // On one core (the affinity a binding launcher may give) the cap is 1, whatever the machine.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const cpu_set_t just_one = first_core_of(saved);
  ASSERT_EQ(sched_setaffinity(0, sizeof(just_one), &just_one), 0);
  setenv("OMP_NUM_THREADS", "64", 1);
  ::testing::internal::CaptureStderr();
  const int from_env = ThreadPool(0, "trainer.num_threads").num_threads();
  const int explicit_two = ThreadPool(2, "--threads").num_threads();
  warning = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(from_env, 1);
  EXPECT_EQ(explicit_two, 1);
  EXPECT_NE(warning.find("OMP_NUM_THREADS: 64 threads asked, 1 used"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--threads: 2 threads asked, 1 used"), std::string::npos) << warning;
  // Within the cores nothing is said.
  ::testing::internal::CaptureStderr();
  const ThreadPool one(1, "trainer.num_threads");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(ThreadPool, NumCoresFollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(num_cores(), CPU_COUNT(&saved));
  const cpu_set_t just_one = first_core_of(saved);
  ASSERT_EQ(sched_setaffinity(0, sizeof(just_one), &just_one), 0);
  const int bound = num_cores();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(bound, 1);
}

}  // namespace
}  // namespace rf
