// The work split of the grouped GEMM (moe.h): every expert's product c_MN = a_MK b_KN is cut into tiles of
// at most kTileRows x kTileCols of c, and all the experts' tiles run in ONE parallel region, each tile one
// single-threaded product on the GEMM engine. With skewed groups (a few experts of thousands of rows, many
// of a few dozen) a loop of per-expert GEMMs forks once per expert and splits a few dozen rows over the
// threads; here the small experts' tiles run side by side and the big experts' tiles even out the load.
// The tiles depend on the shapes alone and each is computed on one thread with the full K (never split),
// so a tile's bits do not depend on the thread count nor on which thread runs it.
// What is not here: the products themselves (linear.cpp hands each tile to its engine).
// Legend: E experts; an expert's product c_MN = a_MK b_KN as in BLAS.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

// An engine packs a tile's b (kTileCols x K) once per tile, so a b column block is packed once per row tile:
// 512 rows keep that a fraction of a percent of the products (one packed element per 2 x 512 flops),
// 256 columns cut the biggest experts of a skewed batch into enough tiles to spread over the threads.
constexpr int64_t kTileRows = 512, kTileCols = 256;
// A small expert's tiles widen (by whole kTileCols, up to all N columns) until a tile holds this many
// multiply-adds: an engine call costs microseconds, which hundreds of tiny tiles would add up to.
constexpr int64_t kMinTileWork = int64_t(1) << 24;

struct GroupTile {
  int64_t expert;
  int64_t row0, rows;  // of the expert's c (M)
  int64_t col0, cols;  // of the expert's c (N)
  int64_t cost;        // rows x cols x max(K, 1): the products, or the zeroing when K = 0
};

// The tiles of experts whose c is m_E[e] x N with depth k_E[e] (an expert with m_E[e] = 0 has none),
// largest first: dynamic scheduling then ends on the small tiles, which level the threads' finish times.
inline std::vector<GroupTile> group_tiles(std::span<const int64_t> m_E, int64_t N, std::span<const int64_t> k_E) {
  std::vector<GroupTile> tiles;
  for (size_t e = 0; e < m_E.size(); ++e) {
    if (m_E[e] == 0) continue;
    const int64_t depth = std::max<int64_t>(k_E[e], 1), tile_work = std::min(kTileRows, m_E[e]) * depth;
    const int64_t widen = std::max<int64_t>(1, (kMinTileWork / kTileCols + tile_work - 1) / tile_work);
    const int64_t width = std::min(N, widen * kTileCols);
    for (int64_t r0 = 0; r0 < m_E[e]; r0 += kTileRows)
      for (int64_t c0 = 0; c0 < N; c0 += width) {
        const int64_t rows = std::min(kTileRows, m_E[e] - r0), cols = std::min(width, N - c0);
        tiles.push_back({int64_t(e), r0, rows, c0, cols, rows * cols * depth});
      }
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const GroupTile& a, const GroupTile& b) { return a.cost > b.cost; });
  return tiles;
}

// run(tile) for every tile in one parallel region. Each thread caps its own nested team at one thread, so
// the engine a tile calls (oneDNN, OpenBLAS, the ordered GEMM: all OpenMP) runs on the calling thread, on a
// team of one as on a team of many. An exception in a tile (an engine failure) is rethrown after the region.
template <class Run>
void run_group_tiles(const std::vector<GroupTile>& tiles, const Run& run) {
  std::exception_ptr error;
#pragma omp parallel
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (size_t i = 0; i < tiles.size(); ++i) {
      try {
        run(tiles[i]);
      } catch (...) {
#pragma omp critical(rf_group_tiles_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace rf::kernels::RF_CPU_NS
