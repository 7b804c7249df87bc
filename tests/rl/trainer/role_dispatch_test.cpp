// RoleDispatch in one process: on the role, every dispatch mode has one chunk, this rank's, holding every
// response (balanced or not) and every prompt, and this rank collects it; off the role (member false) the
// chunk is empty and nothing is collected. Over ranks (a TP=2 layout: ranks of a TP group share a chunk,
// only tp rank 0 collects): rl_stages_mpi_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "rl/trainer/role_dispatch.h"
#include "rl_roles_fixture.h"

namespace rf::rl {
namespace {

constexpr DispatchMode kModes[] = {DispatchMode::one_to_all, DispatchMode::dp_compute_proto,
                                   DispatchMode::megatron_compute_proto, DispatchMode::megatron_pp_as_dp_proto};

TEST(RoleDispatch, OnTheRoleOneProcessComputesAndCollectsEverything) {
  const dist::ParallelContext parallel = dist::ParallelContext::single_process();
  const RlBatch batch = testing::eight_responses();
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  for (const DispatchMode mode : kModes) {
    SCOPED_TRACE(std::string(dispatch_mode_name(mode)));
    const RoleDispatch dispatch(mode, parallel, true);
    EXPECT_TRUE(dispatch.member());
    EXPECT_EQ(dispatch.num_chunks(), 1);
    EXPECT_EQ(dispatch.chunk(batch, all, false), all);
    EXPECT_EQ(dispatch.chunk(batch, all, true), all);
    // A subset of the responses stays that subset, in its order.
    const std::vector<int64_t> some = {6, 1, 3};
    EXPECT_EQ(dispatch.chunk(batch, some, false), some);
    EXPECT_EQ(dispatch.contiguous_chunk(5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_TRUE(dispatch.contiguous_chunk(0).empty());
    EXPECT_TRUE(dispatch.collects());
  }
}

TEST(RoleDispatch, OffTheRoleNothingIsComputedOrCollected) {
  const dist::ParallelContext parallel = dist::ParallelContext::single_process();
  const RlBatch batch = testing::eight_responses();
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  for (const DispatchMode mode : kModes) {
    SCOPED_TRACE(std::string(dispatch_mode_name(mode)));
    const RoleDispatch dispatch(mode, parallel, false);
    EXPECT_FALSE(dispatch.member());
    EXPECT_TRUE(dispatch.chunk(batch, all, false).empty());
    EXPECT_TRUE(dispatch.chunk(batch, all, true).empty());
    EXPECT_TRUE(dispatch.contiguous_chunk(5).empty());
    EXPECT_FALSE(dispatch.collects());
  }
}

}  // namespace
}  // namespace rf::rl
