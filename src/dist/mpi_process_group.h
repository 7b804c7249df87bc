// The MPI implementation of ProcessGroup. Its class lives in mpi_process_group.cpp so that mpi.h stays
// out of every header: callers get a ProcessGroup over MPI_COMM_WORLD here and further groups by split().
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace rf::dist {

// A group over MPI_COMM_WORLD named "world". MPI must be initialised (MpiRuntime), and this group and
// every group split from it must be destroyed before MPI is finalised.
std::unique_ptr<ProcessGroup> make_mpi_world_group();

}  // namespace rf::dist
