#include "model/tp_region.h"

#include "dist/tp_comm.h"

namespace rf::model {

TensorView enter_column_parallel(const LayerContext& ctx, TensorView xn_local, TensorView xn_full) {
  if (!ctx.parallel.sequence_parallel()) {
    dist::TpCopy::forward(ctx.parallel.tp(), xn_local);
    return xn_local;
  }
  dist::SpGather::forward(ctx.parallel.tp(), xn_local, xn_full);
  return xn_full;
}

TensorView leave_column_parallel_backward(const LayerContext& ctx, TensorView dxn_full, TensorView dxn_local) {
  if (!ctx.parallel.sequence_parallel()) {
    dist::TpCopy::backward(ctx.parallel.tp(), dxn_full);
    return dxn_full;
  }
  dist::SpGather::backward(ctx.parallel.tp(), dxn_full, dxn_local);
  return dxn_local;
}

void row_parallel_linear_residual(const LayerContext& ctx, TensorView x_NF, TensorView w_CF, TensorView residual_local,
                                  TensorView out_local, TensorView partial_NC) {
  const auto& k = ctx.kernels;
  dist::ProcessGroup& tp = ctx.parallel.tp();
  if (!ctx.parallel.sequence_parallel()) {
    // Each rank holds a partial product; only TP rank 0 adds the residual, so the sum has it once.
    if (tp.rank() == 0)
      k.linear_residual_forward(x_NF, w_CF, residual_local, out_local);
    else
      k.linear_forward(x_NF, w_CF, TensorView(), out_local);
    dist::TpReduce::forward(tp, out_local);
    return;
  }
  // This rank's rows of the partial product get its residual rows in the GEMM epilogue (the other
  // rows none), so the reduce-scatter leaves residual + the whole product in this rank's rows.
  const int64_t n = out_local.size(0), first = tp.rank() * n, N = x_NF.size(0);
  auto rows = [](TensorView t, int64_t start, int64_t count) { return t.slice(0, start, count); };
  if (first > 0) k.linear_forward(rows(x_NF, 0, first), w_CF, TensorView(), rows(partial_NC, 0, first));
  k.linear_residual_forward(rows(x_NF, first, n), w_CF, residual_local, rows(partial_NC, first, n));
  if (first + n < N)
    k.linear_forward(rows(x_NF, first + n, N - first - n), w_CF, TensorView(), rows(partial_NC, first + n, N - first - n));
  dist::SpScatter::forward(tp, partial_NC, out_local);
}

void row_parallel_linear(const LayerContext& ctx, TensorView x_NF, TensorView w_CF, TensorView out_local,
                         TensorView partial_NC) {
  if (!ctx.parallel.sequence_parallel()) {
    ctx.kernels.linear_forward(x_NF, w_CF, TensorView(), out_local);
    dist::TpReduce::forward(ctx.parallel.tp(), out_local);
    return;
  }
  ctx.kernels.linear_forward(x_NF, w_CF, TensorView(), partial_NC);
  dist::SpScatter::forward(ctx.parallel.tp(), partial_NC, out_local);
}

TensorView row_parallel_output_grad(const LayerContext& ctx, TensorView dout_local, TensorView dout_full) {
  if (!ctx.parallel.sequence_parallel()) {
    dist::TpReduce::backward(ctx.parallel.tp(), dout_local);
    return dout_local;
  }
  dist::SpScatter::backward(ctx.parallel.tp(), dout_local, dout_full);
  return dout_full;
}

}  // namespace rf::model
