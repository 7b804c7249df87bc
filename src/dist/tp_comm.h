// Megatron's conjugate tensor-parallel mappings, each a forward/backward pair (megatron.md §2.1):
//   TpCopy:    forward identity,        backward all-reduce      (entry of a column-parallel linear)
//   TpReduce:  forward all-reduce,      backward identity        (exit of a row-parallel linear)
// and their sequence-parallel replacements (§2.6), over the TP group along dim 0, the sequence:
//   SpGather:  forward all-gather,      backward reduce-scatter  (entry of a column-parallel linear;
//              Megatron's gather_from_sequence_parallel_region with tensor_parallel_output_grad)
//   SpScatter: forward reduce-scatter,  backward all-gather      (exit of a row-parallel linear;
//              Megatron's reduce_scatter_to_sequence_parallel_region)
// Each backward is its forward's adjoint: sum over ranks of <forward(x), y> = <x, backward(y)>.
// With SP, TP rank r holds rows [r*T/tp, (r+1)*T/tp) of the sequence: a `_local` tensor has T/tp rows,
// its full counterpart T; the other dims are the same on both. With a TP group of size 1 every pair is
// the identity (or a copy), which is how the single-process run works.
#pragma once

#include "dist/process_group.h"

namespace rf::dist {

struct TpCopy {
  static void forward(ProcessGroup&, TensorView) {}
  static void backward(ProcessGroup& tp, TensorView dx) {
    if (tp.size() > 1) tp.all_reduce(dx, ReduceOp::sum);
  }
};

struct TpReduce {
  static void forward(ProcessGroup& tp, TensorView y) {
    if (tp.size() > 1) tp.all_reduce(y, ReduceOp::sum);
  }
  static void backward(ProcessGroup&, TensorView) {}
};

// Throws unless `full` has tp.size() times the rows of `local` and the same other dims; `what` names the pair.
void check_sequence_shards(const ProcessGroup& tp, const TensorView& local, const TensorView& full, const char* what);

struct SpGather {
  // x_full = every rank's x_local, stacked in rank order.
  static void forward(ProcessGroup& tp, TensorView x_local, TensorView x_full) {
    check_sequence_shards(tp, x_local, x_full, "SpGather");
    tp.all_gather(x_local, x_full);
  }
  // dx_local = this rank's rows of the sum over ranks of dx_full.
  static void backward(ProcessGroup& tp, TensorView dx_full, TensorView dx_local) {
    check_sequence_shards(tp, dx_local, dx_full, "SpGather");
    tp.reduce_scatter(dx_full, dx_local);
  }
};

struct SpScatter {
  // y_local = this rank's rows of the sum over ranks of y_full (the row-parallel partial products).
  static void forward(ProcessGroup& tp, TensorView y_full, TensorView y_local) {
    check_sequence_shards(tp, y_local, y_full, "SpScatter");
    tp.reduce_scatter(y_full, y_local);
  }
  // dy_full = every rank's dy_local, stacked in rank order.
  static void backward(ProcessGroup& tp, TensorView dy_local, TensorView dy_full) {
    check_sequence_shards(tp, dy_local, dy_full, "SpScatter");
    tp.all_gather(dy_local, dy_full);
  }
};

}  // namespace rf::dist
