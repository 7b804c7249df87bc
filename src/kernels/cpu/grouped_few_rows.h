// The grouped GEMM's kernels for experts of few rows (moe.h, run per tile by linear.cpp): below kFewRows rows an
// engine's GEMM spends more on packing a tile's whole weight slice and on its call than on the products, so these
// stream each weight row once per tile straight from w and keep several outputs in registers
// (gemm_register_tiles.h). f32 and bf16 (multiplied and added in f32, rounded once when stored, as the engines do).
// Each call is one tile on the calling thread with the whole reduction: its bits depend on the shapes alone.
// What is not here: the generic variant (no vector kernel; the engines run its tiles), the ordered GEMM (whose
// grouped results stay one linear call per expert, bit for bit), the tiling (grouped_tiles.h).
// Legend: M the tile's rows of one expert, I in-features, O out-features.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/accumulate.h"
#include "kernels/cpu/cpu_kernels.h"

namespace rf::kernels::RF_CPU_NS {

#if defined(__AVX2__)
constexpr bool kHasFewRowKernels = true;
#else
constexpr bool kHasFewRowKernels = false;
#endif
// The experts of an RL batch at Qwen3-30B-A3B's shape (J = 512-2048 rows over 64-128 local experts: 4-16 rows on
// average) are well below it; the tiles' stack buffers scale with it. Where exactly the engines overtake these
// kernels between 32 and 64 rows was not measured (docs/performance.md).
constexpr int64_t kFewRows = 32;

// y_MO = x_MI w_OI^T.
void few_rows_forward(TensorView x_MI, TensorView w_OI, TensorView y_MO);
// dx_MI (= or +=) dy_MO w_OI.
void few_rows_dgrad(TensorView dy_MO, TensorView w_OI, TensorView dx_MI, Accumulate mode);
// dw_OI (= or +=) dy_MO^T x_MI, M <= kFewRows.
void few_rows_wgrad(TensorView dy_MO, TensorView x_MI, TensorView dw_OI, Accumulate mode);

}  // namespace rf::kernels::RF_CPU_NS
