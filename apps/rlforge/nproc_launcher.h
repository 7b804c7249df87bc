// `rlforge <command> --nproc N ...`: runs the command as N MPI ranks on this machine without the user
// typing an MPI flag. The process re-executes itself as `mpirun -np N <flags> <this binary> <args>`,
// with what a laptop or a container needs:
//   --oversubscribe       more ranks than slots (Open MPI counts cores, or one slot per container CPU)
//   --bind-to none        Open MPI binds each rank to one core by default; we want each to use its threads
//   --allow-run-as-root   when root (containers), which Open MPI otherwise refuses
//   OMP_NUM_THREADS       cores / N per rank (at least 1), unless the user set it: ranks x threads = cores
// The command line is logged. Open MPI's own notices stay on (its banner after an abort, and which rank
// died of which signal, e.g. when the OOM killer strikes), so they are not silenced with --quiet.
// Plain `mpirun`/`srun` works too: the process is then already a rank, and `--nproc`, if given, must
// match the world size. Not here: starting MPI (dist::MpiRuntime) and the guarded main (dist::run_guarded).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rf::apps {

// Removes `--nproc N` / `--nproc=N` (anywhere after the program name) from `args` and returns N;
// nullopt when absent. Throws ConfigError keyed `--nproc` unless N is a positive integer.
std::optional<int> take_nproc_option(std::vector<std::string>& args);

// Replaces this process with mpirun running `args` (program name first, `--nproc` removed) as `nproc`
// ranks, after setting OMP_NUM_THREADS (cores / nproc) unless it is set; more ranks than cores get a
// warning first, with the oversubscription factor (ranks / cores). Returns only by throwing, when
// mpirun cannot be started.
[[noreturn]] void relaunch_under_mpirun(int nproc, const std::vector<std::string>& args);

}  // namespace rf::apps
