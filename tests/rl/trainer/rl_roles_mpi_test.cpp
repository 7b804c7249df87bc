// RlRoles' stages under mpirun against one process: the actor on every rank (DP = the world), each DP rank
// computing its balanced share of the old-log-prob pass and the shares gathered to every rank, gives every
// response the bits one process gives it (deterministic mode's batch-invariant kernels).
#include <gtest/gtest.h>

#include "rl/trainer/rl_roles.h"
#include "mpi_test_world.h"
#include "rl_roles_fixture.h"

namespace rf::rl {
namespace {

using testing::old_log_probs;
using dist::testing::world;

TEST(RlRolesMpi, OldLogProbsOverTheWorldEqualOneProcess) {
  dist::SingleProcessGroup alone("alone");
  const RlBatch one = old_log_probs(alone);
  const RlBatch many = old_log_probs(world());
  ASSERT_EQ(many.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].old_log_probs.size(), one[i].response.size());
    EXPECT_EQ(many[i].old_log_probs, one[i].old_log_probs) << "response " << i << " on rank " << world().rank();
    EXPECT_EQ(many[i].entropy, one[i].entropy) << "response " << i << " on rank " << world().rank();
  }
}

}  // namespace
}  // namespace rf::rl
