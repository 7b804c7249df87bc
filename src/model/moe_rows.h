// The row-wise arithmetic of an MoE layer between its GEMMs: each routed row's activation scaled by its
// routing weight (Megatron multiplies the probs after the activation, megatron.md §6.7), the dot products that give
// those weights' gradients, and the shared expert's gated add. O(rows x width) next to the GEMMs' O(rows x width x
// hidden): plain loops over rows, threaded over rows. add_rows joins the shared expert's TP-reduced input gradient.
// Rows x, y, s in the compute dtype (f32, bf16 or f64, contiguous); weights p and results of row_dots in the
// statistics dtype (f32 for f32 and bf16, f64 for f64). Arithmetic in that statistics dtype, rounded once per value.
// Legend: R rows, F width.
#pragma once

#include "core/tensor_view.h"

namespace rf::model {

// y_RF = x_RF * p_R (row r scaled by p[r]).
void scale_rows(TensorView x_RF, TensorView p_R, TensorView y_RF);
// out_R = sum over f of a_RF * b_RF.
void row_dots(TensorView a_RF, TensorView b_RF, TensorView out_R);
// y_RF += p_R * s_RF.
void add_scaled_rows(TensorView s_RF, TensorView p_R, TensorView y_RF);
// y_RF += x_RF (each sum rounded once to the rows' dtype).
void add_rows(TensorView x_RF, TensorView y_RF);

}  // namespace rf::model
