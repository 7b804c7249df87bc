#include "model/param_init.h"

#include "core/philox.h"

namespace rf::model {

void init_params(const ParamStore& params, const ModelConfig& config, uint64_t seed) {
  fill_zero(params.flat());
  const auto& entries = params.layout().entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    const TensorView view = params.get(e.name);
    const bool is_bias = e.name.ends_with(".bias");
    const bool is_norm = e.name.ends_with("norm.weight");
    if (is_norm) {
      fill_uniform(view, Philox(seed, i), 1.0, 1.0);
    } else if (!is_bias) {
      fill_normal(view, Philox(seed, i), 0.0, config.initializer_range);
    }
  }
}

}  // namespace rf::model
