// The MPI tests' world and helpers. mpi_test_main.cpp starts MPI (in singleton mode too, so the binary
// also runs without mpirun) and hands every test the world group through world(). Tests are written for
// any world size and compare with values each rank computes itself for every rank.
#pragma once

#include "core/tensor.h"
#include "dist/process_group.h"

namespace rf::dist::testing {

ProcessGroup& world();

// Small integers (|v| <= 11), so sums over a few ranks are exact in every dtype, bf16 included.
inline double value(int rank, int64_t i) { return double((rank * 7 + i * 3) % 23) - 11.0; }

// A tensor of `shape` whose element i (row-major) is value(rank, first + i).
Tensor rank_tensor(Shape shape, DType dtype, int rank, int64_t first = 0);

}  // namespace rf::dist::testing
