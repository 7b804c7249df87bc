// KernelTable: one implementation of every op, as typed function pointers. Each variant (`ref`,
// and the `cpu` kernels built once per instruction set) provides one table; the KernelRegistry
// picks a table per (op, dtype).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/linear.h"
#include "kernels/logprob.h"
#include "kernels/moe.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace rf::kernels {

// Ordered slowest to fastest: the registry takes the last one the CPU can run.
enum class KernelVariant : uint8_t { ref, cpu_generic, cpu_avx2, cpu_avx512 };
inline constexpr int kNumKernelVariants = 4;

// Op families: forward and backward of one family always come from the same variant.
enum class KernelOp : uint8_t {
  embedding,
  gemm,
  linear,
  rmsnorm,
  rope,
  attention,
  swiglu,
  logprob,
  adamw,
  grad_norm,
  paged_attention,  // paged_attention_forward and kv_cache_write (the rollout's KV cache)
  moe,  // moe_permute, moe_unpermute, moe_gather and the grouped GEMM (GEMM-backed)
};
inline constexpr int kNumKernelOps = 12;

// The engine under the cpu variants' GEMM-backed ops (gemm, linear, the moe grouped GEMM): oneDNN's
// matmul, OpenBLAS's sgemm (f32 only), or the ordered GEMM (ours, cpu/ordered_gemm.h: one reduction order
// per element whatever the batch, threads or ISA).
enum class GemmLibrary : uint8_t { onednn, openblas, ordered };
// The size classes the f32 engine may differ by: calls with at most this many rows (tokens) and more.
inline constexpr int64_t kFewRows = 64;

std::string_view kernel_variant_name(KernelVariant variant);
std::string_view gemm_library_name(GemmLibrary library);
GemmLibrary parse_gemm_library(std::string_view name);  // throws naming the text
std::string_view kernel_op_name(KernelOp op);
KernelVariant parse_kernel_variant(std::string_view name);  // throws naming the text
KernelOp parse_kernel_op(std::string_view name);

struct KernelTable {
  KernelVariant variant;
  EmbeddingForwardFn embedding_forward;
  EmbeddingBackwardFn embedding_backward;
  GemmFn gemm;
  LinearForwardFn linear_forward;
  LinearResidualForwardFn linear_residual_forward;
  LinearDgradFn linear_dgrad;
  LinearWgradFn linear_wgrad;
  RmsNormForwardFn rmsnorm_forward;
  RmsNormBackwardFn rmsnorm_backward;
  RopeForwardFn rope_forward;
  RopeBackwardFn rope_backward;
  AttentionForwardFn attention_forward;
  AttentionBackwardFn attention_backward;
  AttentionMergeFn attention_merge;
  SwiGluForwardFn swiglu_forward;
  SwiGluBackwardFn swiglu_backward;
  LogprobForwardFn logprob_forward;
  LogprobShardStatsFn logprob_shard_stats;
  LogprobBackwardFn logprob_backward;
  AdamWStepFn adamw_step;
  SumSquaresFn sum_squares;
  ScaleFn scale;
  PagedAttentionForwardFn paged_attention_forward;
  KvCacheWriteFn kv_cache_write;
  MoePermuteFn moe_permute;
  MoeUnpermuteFn moe_unpermute;
  MoeGatherFn moe_gather;
  GroupedGemmForwardFn grouped_gemm_forward;
  GroupedGemmDgradFn grouped_gemm_dgrad;
  GroupedGemmWgradFn grouped_gemm_wgrad;
};

// Whether a variant implements an op for a dtype (the `ref` variant implements all ops for f32,
// bf16 and f64; the `cpu` variants for f32 and bf16).
bool variant_supports(KernelVariant variant, DType dtype);

namespace ref {
const KernelTable& table();
}
// table(): GEMM-backed ops (gemm, linear, grouped GEMM) on oneDNN; openblas_table(), ordered_table(): on
// OpenBLAS, on the ordered GEMM.
namespace cpu_generic {
const KernelTable& table();
const KernelTable& openblas_table();
const KernelTable& ordered_table();
}
namespace cpu_avx2 {
const KernelTable& table();
const KernelTable& openblas_table();
const KernelTable& ordered_table();
}
namespace cpu_avx512 {
const KernelTable& table();
const KernelTable& openblas_table();
const KernelTable& ordered_table();
}

}  // namespace rf::kernels
