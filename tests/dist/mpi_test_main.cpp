// GoogleTest main for the MPI tests: every rank runs every test. Rank 0 prints the full report, the
// others only their failures; a rank that fails exits non-zero, and so does mpirun.
#include <gtest/gtest.h>

#include "core/element_access.h"
#include "dist/mpi_runtime.h"
#include "mpi_test_world.h"

namespace rf::dist::testing {
namespace {

ProcessGroup* the_world = nullptr;  // set by main for the tests' lifetime

}  // namespace

ProcessGroup& world() { return *the_world; }

Tensor rank_tensor(Shape shape, DType dtype, int rank, int64_t first) {
  Tensor t(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) store_f64(t, i, value(rank, first + i));
  return t;
}

}  // namespace rf::dist::testing

int main(int argc, char** argv) {
  const rf::dist::MpiRuntime mpi(rf::dist::MpiStart::always);
  if (mpi.rank() != 0) GTEST_FLAG_SET(brief, true);  // before InitGoogleTest, which picks the printer
  ::testing::InitGoogleTest(&argc, argv);
  const std::unique_ptr<rf::dist::ProcessGroup> world = mpi.world();
  rf::dist::testing::the_world = world.get();
  return RUN_ALL_TESTS();
}
