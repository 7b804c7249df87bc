#include "dist/tp_comm.h"

namespace rf::dist {

void check_sequence_shards(const ProcessGroup& tp, const TensorView& local, const TensorView& full, const char* what) {
  bool same_other_dims = local.rank() == full.rank() && local.rank() >= 1;
  for (int d = 1; same_other_dims && d < local.rank(); ++d) same_other_dims = local.size(d) == full.size(d);
  RF_CHECK(same_other_dims && full.size(0) == local.size(0) * tp.size(),
           "{} over {} ({} ranks): the full tensor {} must have {} x the rows of the local shard {}", what, tp.name(),
           tp.size(), full.shape().to_string(), tp.size(), local.shape().to_string());
}

}  // namespace rf::dist
