// The rollout engine's configuration: the scheduler's limits and the KV cache's size, with the keys
// verl's rollout block gives them (RolloutConfig::fields, spliced into rlforge's rollout section).
#pragma once

#include <cstdint>
#include <optional>

namespace rf::engine::rollout {

struct SchedulerLimits {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  bool enable_chunked_prefill = true;
  int64_t max_model_len = 4096;  // prompt + generated tokens of one sequence
  // An ablation for benchmarks: admit waiting sequences only when none is running, so a batch runs
  // until its longest sample ends (static batching, as a plain generate loop does).
  bool static_batching = false;
  // With static_batching, as a padded generate loop runs it (HF generate, bench/torch_rollout.py): a
  // finished sequence keeps its seat and keeps being computed (its extra tokens are dropped) until the
  // last sequence of its batch ends; then the whole batch retires. What continuous batching saves.
  bool pad_finished = false;
};

struct RolloutConfig {
  int64_t block_size = 16;
  std::optional<int64_t> kv_cache_bytes;  // else gpu_memory_utilization x device_memory_bytes
  double gpu_memory_utilization = 0.5;
  int64_t device_memory_bytes = 0;        // not a key: the device tier's budget (the run's resources)
  bool enable_prefix_caching = false;
  SchedulerLimits limits;                 // max_model_len is not a key: the run's prompt + response length

  // verl's rollout keys for the engine (flat in its rollout block, the scheduler's limits among them).
  template <class Fields>
  void fields(Fields& f) {
    f("gpu_memory_utilization", gpu_memory_utilization,
      "fraction of resources.device_memory_gb for the KV cache when kv_cache_bytes is null");
    f("kv_cache_bytes", kv_cache_bytes, "rlforge: KV cache size in bytes (wins over gpu_memory_utilization)");
    f("block_size", block_size, "rlforge: tokens per KV cache block");
    f("max_num_batched_tokens", limits.max_num_batched_tokens, "tokens per engine step (prefill chunks + decodes)");
    f("max_num_seqs", limits.max_num_seqs, "sequences running at once");
    f("enable_chunked_prefill", limits.enable_chunked_prefill, "split long prompts over steps");
    f("enable_prefix_caching", enable_prefix_caching, "reuse identical prompt prefixes across requests");
  }
  // ConfigError naming the key: gpu_memory_utilization outside (0, 1], a size that is not positive.
  void validate() const;
};

}  // namespace rf::engine::rollout
