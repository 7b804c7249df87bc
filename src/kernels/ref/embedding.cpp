// Reference token embedding (contract in kernels/embedding.h): a row copy per token in forward,
// and in backward one `+=` per (token, column), in token order, each rounded to dtable's dtype as
// a gradient buffer update is.
// Legend: N tokens, C hidden, V vocab rows held here.
#include "core/element_access.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/rowwise_op_checks.h"

namespace rf::kernels::ref {

void embedding_forward(const EmbeddingParams& p, TensorView ids_N, TensorView table_VC, TensorView out_NC) {
  check_embedding_forward(ids_N, table_VC, out_NC);
  const int64_t V = table_VC.size(0), C = table_VC.size(1);
  for (int64_t n = 0; n < ids_N.size(0); ++n) {
    const int64_t row = int64_t(load_f64(ids_N, n * ids_N.stride(0))) - p.vocab_start;
    const bool held_here = row >= 0 && row < V;
    for (int64_t c = 0; c < C; ++c)
      store_f64(out_NC, n * out_NC.stride(0) + c, held_here ? load_f64(table_VC, row * table_VC.stride(0) + c) : 0.0);
  }
}

void embedding_backward(const EmbeddingParams& p, TensorView ids_N, TensorView dout_NC, TensorView dtable_VC) {
  check_embedding_backward(ids_N, dout_NC, dtable_VC);
  const int64_t V = dtable_VC.size(0), C = dtable_VC.size(1);
  for (int64_t n = 0; n < ids_N.size(0); ++n) {
    const int64_t row = int64_t(load_f64(ids_N, n * ids_N.stride(0))) - p.vocab_start;
    if (row < 0 || row >= V) continue;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = row * dtable_VC.stride(0) + c;
      store_f64(dtable_VC, at, load_f64(dtable_VC, at) + load_f64(dout_NC, n * dout_NC.stride(0) + c));
    }
  }
}

}  // namespace rf::kernels::ref
