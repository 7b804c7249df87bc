#include "dist/guarded_run.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"

namespace rf::dist {
namespace {

// Long enough for rank 0's MPI_Abort to reach every rank (well under a second on one machine, even
// oversubscribed), short enough not to matter on an error path.
constexpr auto kPeerGrace = std::chrono::seconds(2);

int report_and_abort(const MpiRuntime& mpi, std::string_view program, const std::string& message) {
  if (mpi.size() > 1 && mpi.rank() != 0) std::this_thread::sleep_for(kPeerGrace);
  std::fprintf(stderr, "%.*s: %s\n", int(program.size()), program.data(), message.c_str());
  std::fflush(stderr);
  if (mpi.size() > 1) mpi.abort(1);
  return 1;
}

}  // namespace

int run_guarded(const MpiRuntime& mpi, std::string_view program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {  // carries its rank label already
    return report_and_abort(mpi, program, e.what());
  } catch (const std::exception& e) {
    const std::string where = mpi.size() > 1 ? fmt::format("[{}] ", core::rank_label()) : "";
    return report_and_abort(mpi, program, fmt::format("{}unexpected error: {}", where, e.what()));
  }
}

}  // namespace rf::dist
