#include "model/tp_gather.h"

namespace rf::model {

Tensor gather_tp_tensor(const ParamEntry& e, TensorView shard, dist::ProcessGroup& tp) {
  check_shape(shard, e.shape, e.name.c_str());
  if (e.split == TpSplit::replicated || tp.size() == 1) return clone(e.local_part(shard), shard.dtype());
  const int64_t R = tp.size();
  const Tensor gathered({R * shard.numel()}, shard.dtype());
  tp.all_gather(shard, gathered);
  if (e.split == TpSplit::rows) {
    // Rank-major blocks of rows are the rows in order: [R * rows, ...], padding at the end.
    Shape all_rows = e.shape;
    all_rows[0] = R * e.shape[0];
    return clone(gathered.view().reshape(all_rows).slice(0, 0, e.hf_shape[0]), shard.dtype());
  }
  // Columns: rank r's [rows, cols] block goes to columns [r cols, (r + 1) cols).
  const int64_t rows = e.shape[0], cols = e.shape[1];
  Tensor whole(e.hf_shape, shard.dtype());
  const TensorView blocks = gathered.view().reshape({R, rows, cols});
  for (int64_t r = 0; r < R; ++r) copy_convert(blocks.select(0, r), whole.view().slice(1, r * cols, cols));
  return whole;
}

}  // namespace rf::model
