// The two boundaries of every tensor-parallel region in a layer (Megatron §2.2, 2.3, 2.6), written
// once for both residual-stream layouts:
//   TP only: the residual stream holds all N tokens on every rank; entering a column-parallel linear
//     is TpCopy (identity, all-reduce of the gradient), leaving a row-parallel one is TpReduce
//     (all-reduce of the partial products, with the residual added by TP rank 0 in the GEMM epilogue).
//   Sequence parallel: the residual stream holds this rank's n = N / tp consecutive tokens; entering
//     all-gathers the normed input (reduce-scatter of the gradient), leaving reduce-scatters the
//     partial products into this rank's rows (all-gather of the gradient), and the residual is added
//     by each rank to its own rows in the GEMM epilogue before the reduce-scatter.
// The layer code reads the same in both: norm on the local rows, enter, column-parallel linears ...
// row-parallel linear with residual; backward the reverse.
// Legend: N tokens of the micro-batch, n this rank's tokens of the residual stream (N, or N / tp
// with SP), C hidden, F the row-parallel linear's input features (per rank).
#pragma once

#include "model/layer_context.h"

namespace rf::model {

// Forward into a column-parallel region: the whole [N, C] input its linears read. Without SP that is
// xn_local itself (n = N); with SP, all ranks' rows gathered into xn_full.
TensorView enter_column_parallel(const LayerContext& ctx, TensorView xn_local, TensorView xn_full);
// Its backward: dxn_full (the linears' input gradient, [N, C]) to this rank's [n, C] rows, in
// dxn_local with SP (reduce-scatter) or in place without (all-reduce). Returns the local gradient.
TensorView leave_column_parallel_backward(const LayerContext& ctx, TensorView dxn_full, TensorView dxn_local);

// Forward out of a row-parallel region: out_local = residual_local + (sum over TP of x_NF W^T), for
// this rank's rows. `partial_NC` is [N, C] workspace (used with SP only).
void row_parallel_linear_residual(const LayerContext& ctx, TensorView x_NF, TensorView w_CF,
                                  TensorView residual_local, TensorView out_local, TensorView partial_NC);
// The same without a residual (an MoE layer's shared expert, whose output is scaled before it joins the stream).
void row_parallel_linear(const LayerContext& ctx, TensorView x_NF, TensorView w_CF, TensorView out_local,
                         TensorView partial_NC);
// Their backward: the [N, C] output gradient the linear's dgrad and wgrad read, from this rank's rows
// (all-gathered into dout_full with SP; dout_local itself without).
TensorView row_parallel_output_grad(const LayerContext& ctx, TensorView dout_local, TensorView dout_full);

}  // namespace rf::model
