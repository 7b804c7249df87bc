// MPI's error codes as rf::Error, for the files of rf_dist that call MPI (the world communicator is set
// to MPI_ERRORS_RETURN by MpiRuntime, and communicators split or duplicated from it inherit that).
// Internal to rf_dist: it includes mpi.h, which no public header does.
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.h"

namespace rf::dist {

// `what` names the group and the operation ("tp all_reduce (2 ranks, MPI)").
inline void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  const std::string reason = MPI_Error_string(code, text, &length) == MPI_SUCCESS ? std::string(text, size_t(length))
                                                                                   : fmt::format("MPI error code {}", code);
  throw Error(fmt::format("[{}] {} failed: {}", core::rank_label(), what, reason));
}

}  // namespace rf::dist
