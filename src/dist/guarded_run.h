// run_guarded: the one guarded `main` (DESIGN §7). An exception on any rank becomes one clear message
// on stderr ("<program>: <message>") and the end of the whole job (MPI_Abort), so no rank waits forever
// for a peer that failed. In a world of one it is a message and exit code 1.
//
// "Once": an error every rank meets (a bad config) is thrown by every rank at about the same time. Rank 0
// reports at once and aborts, which kills the others while they hold back their own report for a grace
// period. An error that only some ranks meet is reported by the first of them whose grace ends; only
// several ranks failing differently, without rank 0, print more than one message (each with its rank).
#pragma once

#include <functional>
#include <string_view>

#include "dist/mpi_runtime.h"

namespace rf::dist {

// Returns body()'s exit code, or 1 after reporting its exception (returns only in a world of one).
int run_guarded(const MpiRuntime& mpi, std::string_view program, const std::function<int()>& body);

}  // namespace rf::dist
