#include "model/hf_weights.h"

#include <set>

#include "core/log.h"
#include "formats/safetensors_folder.h"

namespace rf::model {
namespace {

bool ignorable(const std::string& name, const ParamLayout& layout) {
  if (name.ends_with("rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && !layout.contains("lm_head.weight");  // tied: the embedding is used
}

}  // namespace

void load_hf_weights(const ParamStore& params, const std::string& model_dir) {
  const ParamLayout& layout = params.layout();
  const formats::SafetensorsFolder weights(model_dir);
  std::set<std::string> loaded;
  for (const std::string& name : weights.names()) {
    const std::string& file = weights.file_of(name).path();
    if (!layout.contains(name)) {
      if (ignorable(name, layout)) {
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
    if (!loaded.count(e.name)) throw IoError(model_dir, fmt::format("weights are missing tensor '{}'", e.name));
}

}  // namespace rf::model
