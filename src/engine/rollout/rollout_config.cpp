#include "engine/rollout/rollout_config.h"

#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace rf::engine::rollout {
namespace {

void require_positive(const std::string& key, int64_t value) {
  if (value <= 0) throw ConfigError(key, fmt::format("must be positive, got {}", value));
}

}  // namespace

void RolloutConfig::validate() const {
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
    throw ConfigError("gpu_memory_utilization", fmt::format("must be in (0, 1], got {}", gpu_memory_utilization));
  if (kv_cache_bytes) require_positive("kv_cache_bytes", *kv_cache_bytes);
  require_positive("block_size", block_size);
  require_positive("max_num_batched_tokens", limits.max_num_batched_tokens);
  require_positive("max_num_seqs", limits.max_num_seqs);
}

}  // namespace rf::engine::rollout
