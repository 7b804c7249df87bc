#include "model/param_init.h"

#include "core/philox.h"

namespace rf::model {

void init_param(const ParamStore& params, const ModelConfig& config, size_t index, uint64_t seed) {
  const ParamEntry& e = params.layout().entries().at(index);
  fill_zero(params.get(e.name));
  if (e.name.ends_with(".bias")) return;
  // The whole tensor is drawn and this TP rank keeps its part, so a model is the same whatever
  // the layout (Megatron's CPU-init mode, §2.9); vocab padding rows stay zero.
  const bool whole = e.shape == e.hf_shape;
  Tensor full;
  if (!whole) full = Tensor(e.hf_shape, params.dtype());
  const TensorView draw = whole ? params.get(e.name) : full.view();
  if (e.name.ends_with("norm.weight"))
    fill_uniform(draw, Philox(seed, uint64_t(e.stream)), 1.0, 1.0);
  else
    fill_normal(draw, Philox(seed, uint64_t(e.stream)), 0.0, config.initializer_range);
  if (!whole) copy_convert(e.hf_part(full), e.local_part(params.get(e.name)));
}

void init_params(const ParamStore& params, const ModelConfig& config, uint64_t seed) {
  fill_zero(params.flat());  // the alignment gaps between tensors too
  for (size_t i = 0; i < params.layout().entries().size(); ++i) init_param(params, config, i, seed);
}

}  // namespace rf::model
