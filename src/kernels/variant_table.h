// Builds a KernelTable from the functions of the variant namespace the includer is in.
// Included once per variant (ref/table.cpp, cpu/table.cpp) inside that namespace.

const KernelTable& table() {
  static const KernelTable kTable{
      kThisVariant,   embedding_forward, embedding_backward, gemm,           linear_forward,
      linear_residual_forward,
      linear_dgrad,   linear_wgrad,      rmsnorm_forward,    rmsnorm_backward, rope_forward,
      rope_backward,  attention_forward, attention_backward, attention_merge, swiglu_forward, swiglu_backward,
      logprob_forward, logprob_shard_stats, logprob_backward, adamw_step,         sum_squares,    scale,
      paged_attention_forward, kv_cache_write, moe_permute, moe_unpermute, moe_gather, grouped_gemm_forward,
      grouped_gemm_dgrad, grouped_gemm_wgrad,
  };
  return kTable;
}
