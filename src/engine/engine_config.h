// EngineConfig: verl's `megatron:` block (verl.md §3; the same type the RL config reads under
// actor_rollout_ref.actor.megatron). Tensor parallel runs at any size the ranks provide; pipeline,
// context and expert parallel sizes other than 1 are accepted by the schema and rejected by
// validate() until they land, so a config written for them fails loudly rather than silently
// running without them.
#pragma once

#include <string>

#include "core/dtype.h"

namespace rf::engine {

struct EngineConfig {
  int64_t tensor_model_parallel_size = 1;
  int64_t make_vocab_size_divisible_by = 128;
  int64_t pipeline_model_parallel_size = 1;
  int64_t context_parallel_size = 1;
  int64_t expert_model_parallel_size = 1;
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  std::string dtype = "bfloat16";  // compute dtype: bfloat16 or float32 (our extension: f32 runs in f32)
  uint64_t seed = 42;
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;

  template <class Fields>
  void fields(Fields& f) {
    f("tensor_model_parallel_size", tensor_model_parallel_size, "TP size");
    f("pipeline_model_parallel_size", pipeline_model_parallel_size, "PP size");
    f("context_parallel_size", context_parallel_size, "CP size");
    f("expert_model_parallel_size", expert_model_parallel_size, "EP size");
    f("make_vocab_size_divisible_by", make_vocab_size_divisible_by,
      "with TP > 1 the vocabulary is padded to a multiple of this x TP (padding masked, never exported)");
    f("sequence_parallel", sequence_parallel, "sequence parallelism (with TP > 1)");
    f("use_distributed_optimizer", use_distributed_optimizer, "ZeRO-1 optimizer sharding over DP");
    f("dtype", dtype, "compute dtype: bfloat16 (bf16 compute, f32 master weights) or float32");
    f("seed", seed, "seed of the weight initialisation");
    f("param_offload", param_offload, "offload weights between uses");
    f("grad_offload", grad_offload, "offload gradients between uses");
    f("optimizer_offload", optimizer_offload, "offload optimizer state between uses");
  }
  void validate() const;
  DType compute_dtype() const;
};

}  // namespace rf::engine
