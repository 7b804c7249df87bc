// Which engine runs the f32 GEMM-backed ops (gemm, linear) fastest on this CPU: measured, never guessed,
// for two size classes (few rows: decode and small micro-batches, <= kFewRows tokens; many rows:
// training and prefill), and cached per CPU so a run pays the measurement (~1 s) once per machine.
// oneDNN's AVX-512 brgemm, OpenBLAS's Haswell kernels on a Zen 3 and the ordered GEMM at few rows each
// win somewhere (docs/performance.md). A batch-invariant registry ignores the choice: it runs the
// ordered GEMM whatever is faster.
#pragma once

#include <filesystem>
#include <string>

#include "kernels/kernel_registry.h"

namespace rf::kernels {

struct GemmChoice {
  GemmLibrary few_rows = GemmLibrary::onednn;
  GemmLibrary many_rows = GemmLibrary::onednn;
  std::string measurements;  // "many rows: onednn 101.2 openblas 88.0 ordered 93.5 GFLOP/s; few rows: ..."
};

// Times every engine on linear forward, dgrad and wgrad at a many-row shape and on the forward at a
// few-row one, on the fastest cpu variant this CPU runs, and keeps the fastest of each.
GemmChoice measure_gemm_choice();

// What the choice depends on: the CPU's brand string, the ISA caps of rlforge (RLFORGE_MAX_CPU_ISA),
// oneDNN and OpenBLAS, and the OpenMP thread count.
std::string gemm_choice_key();

// The choice for gemm_choice_key() from `folder` (one small JSON file per key), measured and published
// when it is not there yet (the first process to publish wins; the others take its choice). An
// unreadable file is measured again and replaced.
GemmChoice cached_gemm_choice(const std::filesystem::path& folder);

// The kernel configuration of a command's engines: batch-invariant (the ordered GEMM runs whatever is
// faster, so nothing is measured), or with the f32 engines of cached_gemm_choice(default_gemm_choice_folder()).
KernelConfig run_kernel_config(bool batch_invariant);

// $XDG_CACHE_HOME/rlforge, else $HOME/.cache/rlforge, else a folder under the system temp directory.
std::filesystem::path default_gemm_choice_folder();

}  // namespace rf::kernels
