// The batch side of a dispatch plan (dispatch_mode.h), as pure functions: cut the controller's batch
// into the plan's chunks, and put the collected outputs back together. Auto-padding is always on, as
// the controller's calls need: a batch whose size the chunk count does not divide gets copies of its
// last sample (verl's dispatcher padding), and collect strips them again. Every chunk carries the
// batch's meta.
// Not here: moving the chunks between ranks (batch_exchange.h), which calls these on the root.
//
// Dimension legend: B batch (samples).
#pragma once

#include <vector>

#include "rl/batch.h"
#include "rl/dispatch_mode.h"

namespace rf::rl {

struct DispatchedBatch {
  std::vector<Batch> chunks;  // chunk c goes to every rank r with plan.chunk_of_rank[r] == c
  int64_t pad_size = 0;       // samples appended to make B a multiple of plan.num_chunks
};

DispatchedBatch dispatch_batch(const Batch& batch, const DispatchPlan& plan);

// The outputs of the plan's collect ranks (outputs_by_rank[plan.collect_rank_of_chunk[c]] for each
// chunk c; the other entries are not read), concatenated in chunk order, without the last pad_size
// samples.
Batch collect_batch(std::vector<Batch> outputs_by_rank, const DispatchPlan& plan, int64_t pad_size);

}  // namespace rf::rl
