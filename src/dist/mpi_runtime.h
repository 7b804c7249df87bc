// MpiRuntime: MPI's lifetime as one object that `main` owns and passes down (no global). MPI itself is
// process-wide state, so a process holds at most one MpiRuntime that initialises it.
//
// A process that no launcher started (no mpirun, srun, ...) is a world of one and, by default, never
// touches MPI: the single-process path needs no MPI daemon, and starts as fast as without MPI. Under a
// launcher MPI is initialised here; `MpiStart::always` initialises it in a lone process too (MPI's
// singleton mode), for tests that want the MPI code path at any size. A process in which someone else
// already initialised MPI adopts it and leaves finalising to them.
// Errors on the world communicator (and every group split from it) are returned, not fatal, so that
// ProcessGroup turns them into rf::Error naming the group and the operation.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace rf::dist {

enum class MpiStart : uint8_t { when_launched, always };

class MpiRuntime {
 public:
  explicit MpiRuntime(MpiStart start = MpiStart::when_launched);
  ~MpiRuntime();  // MPI_Finalize when this object initialised MPI
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  bool active() const { return active_; }  // MPI is initialised
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The whole world: over MPI_COMM_WORLD when active, else a group of one. Destroy it (and what it
  // splits into) before this runtime.
  std::unique_ptr<ProcessGroup> world() const;
  // Ends every rank of the job (MPI_Abort), or this process when MPI is not active.
  [[noreturn]] void abort(int exit_code) const;

 private:
  bool active_ = false;
  bool owns_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace rf::dist
