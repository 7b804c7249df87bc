#include "engine/parallel_setup.h"

namespace rf::engine {

dist::ParallelDims parallel_dims(const EngineConfig& megatron, int world_size) {
  dist::ParallelDims dims;
  dims.world_size = world_size;
  dims.tensor_model_parallel_size = int(megatron.tensor_model_parallel_size);
  dims.pipeline_model_parallel_size = int(megatron.pipeline_model_parallel_size);
  dims.context_parallel_size = int(megatron.context_parallel_size);
  dims.expert_model_parallel_size = int(megatron.expert_parallel_ranks());
  dims.expert_tensor_parallel_size = int(megatron.expert_tensor_parallel_ranks());
  return dims;
}

dist::ParallelContext make_parallel_context(const EngineConfig& megatron, dist::ProcessGroup& world) {
  if (world.size() == 1 && megatron.tensor_model_parallel_size == 1) return dist::ParallelContext::single_process();
  return dist::ParallelContext::create(dist::RankLayout(parallel_dims(megatron, world.size())), world,
                                       megatron.sequence_parallel, megatron.cp_comm_type);
}

}  // namespace rf::engine
