#include "engine/engine_config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rf::engine {

void EngineConfig::validate() const {
  // The axes the engine does not run yet: a config written for them fails here, at read time, on
  // every rank alike, instead of running without them.
  auto single = [](const char* key, const char* parallelism, int64_t value) {
    if (value < 1) throw ConfigError(key, fmt::format("must be >= 1, got {}", value));
    if (value != 1)
      throw ConfigError(key, fmt::format("{}: {} parallelism is not supported yet (only 1; tensor and data "
                                         "parallel are)", value, parallelism));
  };
  if (tensor_model_parallel_size < 1)
    throw ConfigError("tensor_model_parallel_size", fmt::format("must be >= 1, got {}", tensor_model_parallel_size));
  if (make_vocab_size_divisible_by < 1)
    throw ConfigError("make_vocab_size_divisible_by",
                      fmt::format("must be >= 1, got {}", make_vocab_size_divisible_by));
  if (sequence_parallel && tensor_model_parallel_size == 1)
    throw ConfigError("sequence_parallel", "true needs tensor_model_parallel_size > 1 (it splits the sequence over TP)");
  single("pipeline_model_parallel_size", "pipeline", pipeline_model_parallel_size);
  single("context_parallel_size", "context", context_parallel_size);
  single("expert_model_parallel_size", "expert", expert_model_parallel_size);
  if (bucket_size && *bucket_size < 1)
    throw ConfigError("bucket_size", fmt::format("must be >= 1 element (or null), got {}", *bucket_size));
  // Megatron asserts this too: without the distributed optimizer there are no parameters to gather.
  if (overlap_param_gather && !use_distributed_optimizer)
    throw ConfigError("overlap_param_gather",
                      "true needs use_distributed_optimizer: true (it overlaps that optimizer's all-gather)");
  compute_dtype();
}

DType EngineConfig::compute_dtype() const {
  if (dtype == "bfloat16" || dtype == "bf16") return DType::bf16;
  if (dtype == "float32" || dtype == "fp32" || dtype == "f32") return DType::f32;
  throw ConfigError("dtype", fmt::format("'{}': expected bfloat16 or float32", dtype));
}

}  // namespace rf::engine
