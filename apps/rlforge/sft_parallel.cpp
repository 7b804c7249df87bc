#include "apps/rlforge/sft_parallel.h"

#include <fmt/format.h>

#include <iterator>

#include "core/error.h"

namespace rf::apps {

dist::ParallelContext make_parallel_context(const engine::EngineConfig& megatron, dist::ProcessGroup& world) {
  if (world.size() == 1 && megatron.tensor_model_parallel_size == 1) return dist::ParallelContext::single_process();
  dist::ParallelDims dims;
  dims.world_size = world.size();
  dims.tensor_model_parallel_size = int(megatron.tensor_model_parallel_size);
  dims.pipeline_model_parallel_size = int(megatron.pipeline_model_parallel_size);
  dims.context_parallel_size = int(megatron.context_parallel_size);
  dims.expert_model_parallel_size = int(megatron.expert_model_parallel_size);
  return dist::ParallelContext::create(dist::RankLayout(dims), world, megatron.sequence_parallel);
}

std::vector<data::Example> dp_share(std::vector<data::Example> global_batch, const dist::ProcessGroup& dp) {
  const int64_t total = int64_t(global_batch.size()), ranks = dp.size();
  if (total % ranks != 0)
    throw ConfigError("data.train_batch_size",
                      fmt::format("{} examples do not split over {} data-parallel ranks", total, ranks));
  const int64_t share = total / ranks, first = dp.rank() * share;
  return {std::make_move_iterator(global_batch.begin() + first),
          std::make_move_iterator(global_batch.begin() + first + share)};
}

}  // namespace rf::apps
