#include "dist/mpi_runtime.h"

#include <mpi.h>

#include <cstdlib>

#include "core/error.h"
#include "dist/mpi_process_group.h"

namespace rf::dist {
namespace {

// Variables the common launchers set in every rank's environment: Open MPI's mpirun, PMI (MPICH's
// Hydra, Intel MPI, srun --mpi=pmi2) and PMIx (srun --mpi=pmix, Open MPI 5).
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

}  // namespace

MpiRuntime::MpiRuntime(MpiStart start) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  RF_CHECK(!finalized, "MPI was finalised already and cannot start again in this process");
  if (!initialized && (start == MpiStart::always || started_by_launcher())) {
    // FUNNELED: only the main thread calls MPI; the OpenMP workers inside kernels never do.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
    initialized = 1;
    RF_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level {}, rlforge needs MPI_THREAD_FUNNELED",
             provided);
  }
  if (!initialized) return;
  active_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (size_ > 1) core::set_rank_label(fmt::format("rank {}", rank_));
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::unique_ptr<ProcessGroup> MpiRuntime::world() const {
  if (active_) return make_mpi_world_group();
  return std::make_unique<SingleProcessGroup>("world");
}

void MpiRuntime::abort(int exit_code) const {
  if (active_) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; without MPI this process is the whole job
}

}  // namespace rf::dist
