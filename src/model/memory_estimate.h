// What a model needs in memory, estimated from its ModelConfig alone: arithmetic in double on the
// dimensions, before a ParamLayout or any tensor exists (building the layout of num_hidden_layers: 1e9 would
// itself grow memory without end, and no dimension product can overflow). Lower bounds: each term counts
// only what certainly gets allocated, so an estimate above the budget is a model that cannot run here,
// never a false alarm. Not here: the budget (core/memory_budget.h); a trainer's terms (TrainEngine adds
// gradients, Adam moments and activations).
#pragma once

#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/memory_budget.h"
#include "model/model_config.h"

namespace rf::model {

struct MemoryEstimate {  // bytes
  double params = 0, grads = 0, optimizer = 0, activations = 0;
  double layout = 0;  // bookkeeping per tensor (num_hidden_layers x ~12 of them): layouts, names, headers
  double total() const { return params + grads + optimizer + activations + layout; }
  // "1.2 GiB (params 1.0 GiB, layout 2.0 KiB)": the total and each term that is not zero.
  std::string describe() const;
};

// ParamLayout::for_model(config).num_parameters() at TP 1, without building the layout (tested against it).
double count_parameters(const ModelConfig& config);
// The weights in `dtype` and their layout: what a model in memory holds at the least.
MemoryEstimate weights_memory(const ModelConfig& config, DType dtype);

// Throws a ConfigError when the estimate exceeds the budget, before anything is allocated: keyed by the
// dimension furthest above what the largest released models use (the likeliest typo), naming
// config.source, the model, the estimate with its terms and the budget with its source. `purpose` says what
// the estimate is for ("train", "hold its weights").
void require_fits(const ModelConfig& config, const MemoryEstimate& estimate, const MemoryBudget& budget,
                  std::string_view purpose);

}  // namespace rf::model
