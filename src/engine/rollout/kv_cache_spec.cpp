#include "engine/rollout/kv_cache_spec.h"

#include "core/error.h"
#include "core/memory_tracker.h"

namespace rf::engine::rollout {

void KvCacheSpec::validate() const {
  RF_CHECK(num_layers > 0, "KvCacheSpec.num_layers must be positive, got {}", num_layers);
  RF_CHECK(num_kv_heads > 0, "KvCacheSpec.num_kv_heads must be positive, got {}", num_kv_heads);
  RF_CHECK(head_dim > 0, "KvCacheSpec.head_dim must be positive, got {}", head_dim);
  RF_CHECK(block_size > 0, "KvCacheSpec.block_size must be positive, got {}", block_size);
  RF_CHECK(is_floating(dtype), "KvCacheSpec.dtype must be a floating dtype, got {}", dtype_name(dtype));
}

int64_t KvCacheSpec::bytes_per_block() const {
  return 2 * num_layers * block_size * num_kv_heads * head_dim * int64_t(dtype_size(dtype));
}

int64_t KvCacheSpec::blocks_for_tokens(int64_t num_tokens) const {
  return (num_tokens + block_size - 1) / block_size;
}

int64_t num_kv_blocks_for_budget(const KvCacheSpec& spec, int64_t budget_bytes, int64_t max_model_len,
                                 std::string_view budget_key) {
  spec.validate();
  RF_CHECK(max_model_len > 0, "max_model_len must be positive, got {}", max_model_len);
  const int64_t num_blocks = budget_bytes > 0 ? budget_bytes / spec.bytes_per_block() : 0;
  const int64_t needed = spec.blocks_for_tokens(max_model_len);
  if (num_blocks < needed) {
    throw ConfigError(
        std::string(budget_key),
        fmt::format("{} ({} B) holds {} KV blocks of {} ({} tokens x {} layers x {} kv heads x head_dim {} x {}, "
                    "K and V); one sequence of max_model_len={} tokens needs {} blocks ({}): raise the budget or "
                    "lower max_model_len",
                    format_bytes(budget_bytes), budget_bytes, num_blocks, format_bytes(spec.bytes_per_block()),
                    spec.block_size, spec.num_layers, spec.num_kv_heads, spec.head_dim, dtype_name(spec.dtype),
                    max_model_len, needed, format_bytes(needed * spec.bytes_per_block())));
  }
  return num_blocks;
}

KvCacheBudget kv_cache_budget(std::optional<int64_t> kv_cache_bytes, double gpu_memory_utilization,
                              int64_t device_memory_bytes, int64_t held_bytes, std::string_view rollout_key) {
  const std::string bytes_key = fmt::format("{}.kv_cache_bytes", rollout_key);
  const std::string utilization_key = fmt::format("{}.gpu_memory_utilization", rollout_key);
  if (kv_cache_bytes) {
    if (*kv_cache_bytes <= 0) throw ConfigError(bytes_key, fmt::format("must be positive, got {}", *kv_cache_bytes));
    return {*kv_cache_bytes, bytes_key};
  }
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    throw ConfigError(utilization_key, fmt::format("must be in (0, 1], got {}", gpu_memory_utilization));
  }
  if (device_memory_bytes <= 0) {
    throw ConfigError(utilization_key,
                      fmt::format("sizes the KV cache from the device-tier budget (resources.device_memory_gb), "
                                  "which is not set; set it or {}",
                                  bytes_key));
  }
  const auto usable = int64_t(gpu_memory_utilization * double(device_memory_bytes));
  if (usable <= held_bytes) {
    throw ConfigError(utilization_key,
                      fmt::format("{} x {} device memory = {} leaves nothing for the KV cache after the {} the "
                                  "rollout already holds",
                                  gpu_memory_utilization, format_bytes(device_memory_bytes), format_bytes(usable),
                                  format_bytes(held_bytes)));
  }
  return {usable - held_bytes, utilization_key};
}

}  // namespace rf::engine::rollout
