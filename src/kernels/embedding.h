// Token embedding: out_NC = table_VC[ids_N]. Vocab-parallel ready: the table holds rows
// [vocab_start, vocab_start + V) of the full vocabulary; ids outside that range give zero rows and no
// gradient (the TP all-reduce of the outputs then completes them).
// Legend: N tokens (B*T flattened), C hidden, V vocab rows held here.
#pragma once

#include "core/tensor_view.h"

namespace rf::kernels {

struct EmbeddingParams {
  int64_t vocab_start = 0;
};

// ids_N: i32 or i64. table_VC, out_NC: same floating dtype.
using EmbeddingForward = void(const EmbeddingParams&, TensorView ids_N, TensorView table_VC,
                                    TensorView out_NC);
using EmbeddingForwardFn = EmbeddingForward*;
// dtable_VC += dout_NC scattered by ids; dtable is f32 for f32 and bf16 dout (f64 for f64).
using EmbeddingBackward = void(const EmbeddingParams&, TensorView ids_N, TensorView dout_NC,
                                     TensorView dtable_VC);
using EmbeddingBackwardFn = EmbeddingBackward*;

}  // namespace rf::kernels
