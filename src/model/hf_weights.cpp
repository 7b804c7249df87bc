#include "model/hf_weights.h"

#include <set>

#include "core/log.h"
#include "formats/safetensors_folder.h"
#include "model/param_init.h"

namespace rf::model {
namespace {

enum class HeadWeights : uint8_t { from_folder, fresh };

bool is_head_param(const std::string& name) { return name == "lm_head.weight" || name.starts_with("score."); }

bool ignorable(const std::string& name, const ParamLayout& layout, HeadWeights head) {
  if (name.ends_with("rotary_emb.inv_freq")) return true;
  if (layout.in_model(name) && !layout.contains(name)) return true;  // another pipeline stage's
  if (head == HeadWeights::fresh && is_head_param(name)) return true;
  return name == "lm_head.weight" && !layout.contains("lm_head.weight");  // tied: the embedding is used
}

void load_tensors(const ParamStore& params, const std::string& model_dir, HeadWeights head) {
  const ParamLayout& layout = params.layout();
  const formats::SafetensorsFolder weights(model_dir);
  std::set<std::string> loaded;
  for (const std::string& name : weights.names()) {
    const std::string& file = weights.file_of(name).path();
    if (!layout.contains(name) || (head == HeadWeights::fresh && is_head_param(name))) {
      if (ignorable(name, layout, head)) {
        core::log_debug("{}: ignoring {}", file, name);
        continue;
      }
      throw IoError(file, fmt::format("tensor '{}' is not a parameter of this model config", name));
    }
    const ParamEntry& e = layout.entry(name);
    const auto& stored = weights.entry(name);
    if (!(stored.shape == e.hf_shape))
      throw IoError(file, fmt::format("tensor '{}' has shape {}, the config implies {}", name,
                                      stored.shape.to_string(), e.hf_shape.to_string()));
    if (e.shape == e.hf_shape) {
      weights.read_into(name, params.get(name));
    } else {  // a tensor-parallel shard: read the whole tensor, keep this rank's part
      const Tensor whole(e.hf_shape, params.dtype());
      weights.read_into(name, whole);
      fill_zero(params.get(name));  // vocab padding rows
      copy_convert(e.hf_part(whole), e.local_part(params.get(name)));
    }
    loaded.insert(name);
  }
  for (const ParamEntry& e : layout.entries())
    if (!loaded.count(e.name) && !(head == HeadWeights::fresh && is_head_param(e.name)))
      throw IoError(model_dir, fmt::format("weights are missing tensor '{}'", e.name));
}

}  // namespace

void load_hf_weights(const ParamStore& params, const std::string& model_dir) {
  load_tensors(params, model_dir, HeadWeights::from_folder);
}

void load_hf_backbone(const ParamStore& params, const ModelConfig& config, const std::string& model_dir,
                      uint64_t seed) {
  load_tensors(params, model_dir, HeadWeights::fresh);
  const std::vector<ParamEntry>& entries = params.layout().entries();
  for (size_t i = 0; i < entries.size(); ++i)
    if (is_head_param(entries[i].name)) init_param(params, config, i, seed);
}

}  // namespace rf::model
