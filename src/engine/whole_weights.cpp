#include "engine/whole_weights.h"

#include <algorithm>

#include "model/tp_gather.h"

namespace rf::engine {
namespace {

// For each parameter of `whole`, the pipeline rank that holds it (a tied embedding's copy on the last stage
// does not count: the first stage's is the one).
std::vector<int> holding_stages(const model::ParamLayout& whole, const model::ParamLayout& stage,
                                dist::ProcessGroup& pp) {
  Tensor held({int64_t(whole.entries().size())}, DType::i32);
  for (size_t i = 0; i < whole.entries().size(); ++i) {
    const std::string& name = whole.entries()[i].name;
    held.data<int32_t>()[i] = stage.contains(name) && !stage.entry(name).pipeline_copy ? pp.rank() : -1;
  }
  if (pp.size() > 1) pp.all_reduce(held, dist::ReduceOp::max);
  return std::vector<int>(held.data<int32_t>(), held.data<int32_t>() + held.numel());
}

}  // namespace

void for_each_whole_weight(const model::ParamStore& stage, const model::ModelConfig& config,
                           const dist::ParallelContext& parallel, const WeightSink& sink) {
  const model::ParamLayout& layout = stage.layout();
  dist::ProcessGroup &tp = parallel.tp(), &pp = parallel.pp();
  const model::ParamLayout whole = model::ParamLayout::for_model(config, layout.tp());
  const std::vector<int> holder = holding_stages(whole, layout, pp);
  for (size_t i = 0; i < whole.entries().size(); ++i) {
    const model::ParamEntry& e = whole.entries()[i];
    RF_CHECK(holder[i] >= 0, "whole weights: no pipeline stage holds {}", e.name);
    Tensor full;
    if (holder[i] == pp.rank()) {
      const TensorView shard = stage.get(e.name);
      if (tp.size() == 1 && pp.size() == 1) {
        sink(e.name, shard);
        continue;
      }
      full = tp.size() == 1 ? clone(shard, shard.dtype()) : model::gather_tp_tensor(layout.entry(e.name), shard, tp);
    } else {
      full = Tensor(e.hf_shape, stage.dtype());
    }
    if (pp.size() > 1) pp.broadcast(full, holder[i]);
    sink(e.name, full);
  }
}

}  // namespace rf::engine
