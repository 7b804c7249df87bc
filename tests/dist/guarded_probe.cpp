// A program for guarded_abort.sh. Under mpirun, the ranks chosen by argv[1] throw inside run_guarded
// while the others wait in a collective the failed ranks never join; without the guard's abort they
// would wait forever. Modes: "last" (the last rank fails), "all" (every rank fails), "none".
#include <string>

#include "core/error.h"
#include "dist/guarded_run.h"

int main(int argc, char** argv) {
  const rf::dist::MpiRuntime mpi;
  const std::string mode = argc > 1 ? argv[1] : "none";
  return rf::dist::run_guarded(mpi, "probe", [&] {
    const std::unique_ptr<rf::dist::ProcessGroup> world = mpi.world();
    if (mode == "all" || (mode == "last" && world->rank() == world->size() - 1))
      throw rf::ConfigError("probe.key", "failing on purpose");
    world->all_reduce_scalar(1.0, rf::dist::ReduceOp::sum);
    return 0;
  });
}
