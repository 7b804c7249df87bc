// The whole Hugging Face tensor of a parameter from every tensor-parallel rank's shard: what an
// export, a checkpoint of the full model or an equivalence test needs. A collective: every rank of
// `tp` calls it for the same entry, in the same order, and every rank gets the whole tensor.
// Vocab padding rows are dropped; a replicated parameter comes back as a copy of the local one.
#pragma once

#include "core/tensor.h"
#include "dist/process_group.h"
#include "model/param_layout.h"

namespace rf::model {

// shard: this rank's part (entry.shape, contiguous), in any dtype the group can all-gather.
Tensor gather_tp_tensor(const ParamEntry& entry, TensorView shard, dist::ProcessGroup& tp);

}  // namespace rf::model
