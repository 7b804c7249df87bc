// Fast ring-attention update (attention_merge, maths in kernels/attention.h) for f32 and bf16 parts
// into an f32 running result: per (row, head) the two weights once in scalar f32 (a log1p and two exps
// per D elements; libm is exact enough and D amortises it), then out' = w_acc out + w_part out_i over
// the head dim as one vectorised loop. Tokens spread over threads; each (row, head) is written by one
// thread, so results do not depend on the thread count. Same -inf rules as the ref: a part row at -inf
// leaves the running row alone, a running row at -inf takes the part's.
// Not here: f64 (the ref serves it).
// Legend: B batch, T sequence, H heads, D head dim.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_args.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

template <class E>
void merge_rows(TensorView part_out_BTHD, TensorView part_lse_BHT, TensorView acc_out_BTHD, TensorView acc_lse_BHT,
                const AttentionMergeDims& dims) {
  const auto [B, T, H, D] = dims;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const E* part_out = part_out_BTHD.data<E>();
  const float* part_lse = part_lse_BHT.data<float>();
  float* acc_out = acc_out_BTHD.data<float>();
  float* acc_lse = acc_lse_BHT.data<float>();
  auto lse_at = [](const TensorView& x, int64_t b, int64_t h, int64_t t) {
    return b * x.stride(0) + h * x.stride(1) + t * x.stride(2);
  };
#pragma omp parallel for collapse(2) schedule(static) if (B * T * H * D >= kMinParallelElements)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const float lse_i = part_lse[lse_at(part_lse_BHT, b, h, t)];
        float& lse = acc_lse[lse_at(acc_lse_BHT, b, h, t)];
        if (lse_i == kMinusInf) continue;
        const E* part = part_out + b * part_out_BTHD.stride(0) + t * part_out_BTHD.stride(1) + h * part_out_BTHD.stride(2);
        float* acc = acc_out + b * acc_out_BTHD.stride(0) + t * acc_out_BTHD.stride(1) + h * acc_out_BTHD.stride(2);
        if (lse == kMinusInf) {
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) acc[d] = load(part[d]);
          lse = lse_i;
          continue;
        }
        const float hi = std::max(lse, lse_i), lo = std::min(lse, lse_i);
        const float merged = hi + std::log1p(std::exp(lo - hi));
        const float acc_weight = std::exp(lse - merged), part_weight = std::exp(lse_i - merged);
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) acc[d] = acc_weight * acc[d] + part_weight * load(part[d]);
        lse = merged;
      }
    }
  }
}

}  // namespace

void attention_merge(TensorView part_out_BTHD, TensorView part_lse_BHT, TensorView acc_out_BTHD,
                     TensorView acc_lse_BHT) {
  const AttentionMergeDims dims = check_attention_merge_args(part_out_BTHD, part_lse_BHT, acc_out_BTHD, acc_lse_BHT);
  switch (part_out_BTHD.dtype()) {
    case DType::f32: return merge_rows<float>(part_out_BTHD, part_lse_BHT, acc_out_BTHD, acc_lse_BHT, dims);
    case DType::bf16: return merge_rows<bf16>(part_out_BTHD, part_lse_BHT, acc_out_BTHD, acc_lse_BHT, dims);
    default: RF_CHECK(false, "cpu attention_merge: {} runs on ref", dtype_name(part_out_BTHD.dtype()));
  }
}

}  // namespace rf::kernels::RF_CPU_NS
