// KvCacheSpec: the shape of one KV cache block (all layers, K and V) and the sizing rules that turn
// a byte budget into a number of blocks. The cache itself is KvBlockPool (kv_block_pool.h); the
// block tables are KvBlockManager's (kv_block_manager.h). Not here: reading the config tree (the
// rollout engine's config struct owns its keys and passes the values in).
// Legend: L layers, K kv heads (per TP rank), D head dim; a block holds `block_size` tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace rf::engine::rollout {

struct KvCacheSpec {
  int64_t num_layers = 0;    // L
  int64_t num_kv_heads = 0;  // K, per TP rank: K is K/tp here
  int64_t head_dim = 0;      // D
  int64_t block_size = 16;   // tokens per block (vLLM's default)
  DType dtype = DType::bf16;  // the model's compute dtype: the attention kernel reads the cache in it

  void validate() const;  // rf::Error naming the field
  // K and V of one block in every layer: 2 x L x block_size x K x D x sizeof(dtype).
  int64_t bytes_per_block() const;
  // Blocks that hold `num_tokens` tokens: ceil(num_tokens / block_size).
  int64_t blocks_for_tokens(int64_t num_tokens) const;
};

// The number of whole blocks in `budget_bytes`. Throws ConfigError on `budget_key` when that is fewer
// than one sequence of `max_model_len` tokens needs: such a cache could never finish the longest
// request the engine accepts.
int64_t num_kv_blocks_for_budget(const KvCacheSpec& spec, int64_t budget_bytes, int64_t max_model_len,
                                 std::string_view budget_key);

// The KV cache's byte budget and the config key it comes from (named in sizing errors).
struct KvCacheBudget {
  int64_t bytes = 0;
  std::string key;
};

// `rollout.kv_cache_bytes` when set; otherwise `rollout.gpu_memory_utilization` x the device-tier
// budget (`resources.device_memory_gb`, in bytes here) minus `held_bytes`, what the rollout already
// holds on the device tier besides its KV cache (its weights), as vLLM sizes the cache from the
// fraction of device memory the whole engine may use. Pass held_bytes = 0 for the plain product.
// `rollout_key` is the key path of the rollout section ("actor_rollout_ref.rollout"), for errors.
KvCacheBudget kv_cache_budget(std::optional<int64_t> kv_cache_bytes, double gpu_memory_utilization,
                              int64_t device_memory_bytes, int64_t held_bytes,
                              std::string_view rollout_key = "rollout");

}  // namespace rf::engine::rollout
