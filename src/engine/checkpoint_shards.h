// What one rank of a TrainEngine saves to and loads from a checkpoint, as boxes of the global (HF
// shaped) tensors: this is what makes a checkpoint independent of the layout that saved it.
//
// A rank holds its TP shard of every parameter (vocab padding rows included, which are never saved)
// and, for the optimizer, the fragments of its DP shard (optim/bucket_plan.h): flat ranges of the
// parameters that may start and end mid-row, saved as the few boxes that cover them
// (checkpoint/flat_range_boxes.h). The optimizer state is thus stored in model space, by parameter:
// a run saved at TP2 x DP2 with the distributed optimizer loads at TP1 without it, and the reverse.
//
// Saving writes each element once: the parameters from DP rank 0 only, those TP replicates (norms,
// biases of row-parallel layers) from TP rank 0 only, the tied embedding from the first pipeline stage only (the
// last stage's copy is equal: param_layout.h); loading reads everything a rank holds, the copy included.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_writer.h"
#include "model/param_layout.h"
#include "optim/bucket_plan.h"

namespace rf::engine {

// Which of the parameters a rank holds a list names: all of them (loading), or those this rank saves.
enum class Held : uint8_t { all, saved_by_tp_rank0, saved_by_other_tp_rank };

// The parameters laid out by `layout` in `flat` (this TP rank's shards), named prefix + HF name.
std::vector<checkpoint::ShardedTensor> param_shards(const model::ParamLayout& layout, TensorView flat,
                                                    const std::string& prefix, Held held);

// State laid out like this rank's optimizer shard of `plan` (Adam moments), named prefix + HF name.
std::vector<checkpoint::ShardedTensor> optimizer_shards(const model::ParamLayout& layout,
                                                        const optim::BucketPlan& plan, TensorView shard_state,
                                                        const std::string& prefix, Held held);

}  // namespace rf::engine
