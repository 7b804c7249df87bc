#include "rl/batch_dispatch.h"

#include "rl/batch_ops.h"

namespace rf::rl {

DispatchedBatch dispatch_batch(const Batch& batch, const DispatchPlan& plan) {
  PaddedBatch padded = pad_to_divisor(batch, plan.num_chunks, PadFill::last_sample);
  return {chunk(padded.batch, plan.num_chunks), padded.pad_size};
}

Batch collect_batch(std::vector<Batch> outputs_by_rank, const DispatchPlan& plan, int64_t pad_size) {
  RF_CHECK(outputs_by_rank.size() == plan.chunk_of_rank.size(),
           "collect {}: outputs_by_rank: expected one per rank ({}), got {}", dispatch_mode_name(plan.mode),
           plan.chunk_of_rank.size(), outputs_by_rank.size());
  std::vector<Batch> parts;
  for (int rank : plan.collect_rank_of_chunk) parts.push_back(std::move(outputs_by_rank[size_t(rank)]));
  return unpad(Batch::concat(parts), pad_size);
}

}  // namespace rf::rl
