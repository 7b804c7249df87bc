// Moving a dispatch plan's chunks between the ranks of a role (DESIGN §5: the controller is SPMD, the
// root holds the global batch, and each role call scatters by a dispatch mode and gathers by a collect
// mode). Both calls are collectives over `group`, the role's ranks numbered as the plan's layout
// (ParallelContext::role() with DispatchLayout::from_rank_layout(context.layout())).
//   scatter_batch  the root cuts its batch (batch_dispatch.h) and sends each rank its chunk: one
//                  broadcast of the byte counts, then one all-to-all-v in which only the root sends.
//   gather_batch   each collect rank sends its output to the root (one all-gather of the byte counts,
//                  one all-to-all-v in which only the root receives); the root concatenates them in
//                  chunk order and strips the padding.
// A rank that shares a chunk with others (the TP, CP and PP ranks of a Megatron replica) receives its
// own copy; the bytes are (B, T) bookkeeping, not activations.
#pragma once

#include <optional>

#include "dist/process_group.h"
#include "rl/batch.h"
#include "rl/dispatch_mode.h"

namespace rf::rl {

struct ReceivedChunk {
  Batch batch;
  int64_t pad_size = 0;  // the padding added to the root's batch, known on every rank
};

// `global` is read on `root` only (other ranks pass an empty Batch).
ReceivedChunk scatter_batch(const Batch& global, const DispatchPlan& plan, dist::ProcessGroup& group, int root);

// Every rank passes its output (read on collect ranks only); the root gets the collected batch,
// the other ranks nothing. pad_size is the scatter's.
std::optional<Batch> gather_batch(const Batch& output, const DispatchPlan& plan, int64_t pad_size,
                                  dist::ProcessGroup& group, int root);

}  // namespace rf::rl
