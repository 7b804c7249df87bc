// Megatron's conjugate tensor-parallel mappings, each a forward/backward pair (megatron.md §2):
//   TpCopy:   forward identity,          backward all-reduce   (entry of a column-parallel linear)
//   TpReduce: forward all-reduce,        backward identity     (exit of a row-parallel linear)
// With a TP group of size 1 both are the identity, which is how the single-process run works.
// Sequence parallel's SpGather / SpScatter join these with the distributed engine.
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

}  // namespace rf::dist
