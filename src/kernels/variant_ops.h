// Declares every op of one kernel variant, with the signatures fixed by the op headers (a function
// declared through its function type cannot drift from the table's pointer type). Included by
// ref/ref_kernels.h and cpu/cpu_kernels.h inside their variant namespace; nothing else includes it.
// (No include guard on purpose: each variant namespace needs its own declarations.)

EmbeddingForward embedding_forward;
EmbeddingBackward embedding_backward;
Gemm gemm;
LinearForward linear_forward;
LinearResidualForward linear_residual_forward;
LinearDgrad linear_dgrad;
LinearWgrad linear_wgrad;
RmsNormForward rmsnorm_forward;
RmsNormBackward rmsnorm_backward;
RopeForward rope_forward;
RopeBackward rope_backward;
AttentionForward attention_forward;
AttentionBackward attention_backward;
AttentionMerge attention_merge;
SwiGluForward swiglu_forward;
SwiGluBackward swiglu_backward;
LogprobForward logprob_forward;
LogprobShardStats logprob_shard_stats;
LogprobBackward logprob_backward;
AdamWStep adamw_step;
SumSquares sum_squares;
Scale scale;
PagedAttentionForward paged_attention_forward;
KvCacheWrite kv_cache_write;
MoePermute moe_permute;
MoeUnpermute moe_unpermute;
MoeGather moe_gather;
GroupedGemmForward grouped_gemm_forward;
GroupedGemmDgrad grouped_gemm_dgrad;
GroupedGemmWgrad grouped_gemm_wgrad;
