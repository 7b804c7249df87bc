#include "engine/generation_copy.h"

namespace rf::engine {
namespace {

model::ParamStore whole_weights_of(const TrainEngine& engine, MemoryTracker& tracker) {
  model::ParamStore weights(model::ParamLayout::for_model(engine.model_config(), engine.master_weights().layout().tp()),
                            engine.compute_dtype(), {&tracker, MemoryTier::device, MemoryCategory::params});
  engine.export_weights([&](const std::string& name, TensorView full) {
    const model::ParamEntry& e = weights.layout().entry(name);
    copy_convert(e.hf_part(full), e.local_part(weights.get(name)));
  });
  return weights;
}

}  // namespace

GenerationCopy::GenerationCopy(const TrainEngine& engine, const kernels::KernelRegistry& kernels,
                               dist::ParallelContext& parallel, MemoryTracker& tracker, int64_t max_tokens)
    : weights_(whole_weights_of(engine, tracker)),
      model_(engine.model_config(), weights_, nullptr, kernels, parallel, &tracker) {
  model_.reserve(max_tokens);
}

}  // namespace rf::engine
