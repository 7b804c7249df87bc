// KernelRegistry: picks, for every (op, dtype), which variant's kernel runs (DESIGN §1).
//  - optimization_level 0: every op on `ref` (the oracle).
//  - optimization_level >= 1: the fastest `cpu` variant this CPU can run (cpu_avx512, else
//    cpu_avx2, else cpu_generic); dtypes a variant does not implement (f64) fall back to `ref`.
//    RLFORGE_MAX_CPU_ISA caps what "this CPU" means (CpuFeatures::detect).
//  - `force_variant` pins every op to one variant (an error if this CPU cannot run it);
//    `overrides` pin single ops, e.g. {attention -> ref} to bisect a numerics question.
//  - The GEMM-backed ops (gemm, linear, moe's grouped GEMM) of the cpu variants run on one GEMM engine per dtype:
//    f32 on `f32_gemm` (on `f32_gemm_few_rows` for calls of at most kFewRows rows, when set; the apps
//    set both from gemm_choice.h's measurement); bf16 on oneDNN where oneDNN has a bf16 kernel
//    (avx512_core and up), else on the ordered GEMM (ours), so bf16 runs on every x86-64 CPU.
//  - `batch_invariant` makes every op compute each row independently of the other rows of its call
//    (the rollout path, issue #7): the GEMM-backed ops then run on the ordered GEMM in both dtypes,
//    whatever `f32_gemm` says, since its reduction order is fixed by construction (a row's bits do not
//    depend on M, the thread count or the variant), while OpenBLAS's and oneDNN's AVX2 kernels change
//    a row's arithmetic with M (tests/kernels/batch_invariance_test.cpp). Every other op is
//    row-invariant as it is.
// Created once in `main` and passed down by const reference; its call-through methods pick the
// table by the dtype of the op's first floating input.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"

namespace rf::kernels {

struct KernelConfig {
  int optimization_level = 1;
  std::optional<KernelVariant> force_variant;
  std::vector<std::pair<KernelOp, KernelVariant>> overrides;
  GemmLibrary f32_gemm = GemmLibrary::onednn;
  std::optional<GemmLibrary> f32_gemm_few_rows;  // unset: f32_gemm
  bool batch_invariant = false;
};

class KernelRegistry {
 public:
  explicit KernelRegistry(const KernelConfig& config = {}, CpuFeatures features = CpuFeatures::detect());

  const KernelTable& table(KernelOp op, DType dtype) const;
  KernelVariant variant(KernelOp op, DType dtype) const { return table(op, dtype).variant; }
  const CpuFeatures& cpu_features() const { return features_; }
  bool batch_invariant() const { return batch_invariant_; }
  // The engine under the GEMM-backed ops of the cpu variants for `dtype` (f32 or bf16) and calls of `rows`.
  GemmLibrary gemm_library(DType dtype, int64_t rows = kFewRows + 1) const {
    return dtype == DType::bf16 ? bf16_gemm_ : rows <= kFewRows ? f32_gemm_few_rows_ : f32_gemm_;
  }
  // The table of a GEMM-backed op (gemm, linear) for a call of `rows` rows (tokens).
  const KernelTable& gemm_table(KernelOp op, DType dtype, int64_t rows) const {
    return rows <= kFewRows && dtype == DType::f32 ? *few_rows_f32_[op == KernelOp::gemm ? 0 : 1] : table(op, dtype);
  }
  // Whether this CPU can run `variant` (ref and cpu_generic always can).
  bool can_run(KernelVariant variant) const;
  // The start-up lines: CPU features, the variant picked per op and the GEMM engine per dtype, the
  // BLAS and oneDNN in use.
  std::string describe() const;

  void embedding_forward(const EmbeddingParams& p, TensorView ids_N, TensorView table_VC, TensorView out_NC) const {
    table(KernelOp::embedding, table_VC.dtype()).embedding_forward(p, ids_N, table_VC, out_NC);
  }
  void embedding_backward(const EmbeddingParams& p, TensorView ids_N, TensorView dout_NC, TensorView dtable_VC) const {
    table(KernelOp::embedding, dout_NC.dtype()).embedding_backward(p, ids_N, dout_NC, dtable_VC);
  }
  void gemm(const GemmParams& p, TensorView a, TensorView b, TensorView c) const {
    gemm_table(KernelOp::gemm, a.dtype(), c.size(0)).gemm(p, a, b, c);
  }
  void linear_forward(TensorView x_NI, TensorView w_OI, TensorView b_O, TensorView y_NO) const {
    gemm_table(KernelOp::linear, x_NI.dtype(), x_NI.size(0)).linear_forward(x_NI, w_OI, b_O, y_NO);
  }
  void linear_residual_forward(TensorView x_NI, TensorView w_OI, TensorView resid_NO, TensorView y_NO) const {
    gemm_table(KernelOp::linear, x_NI.dtype(), x_NI.size(0)).linear_residual_forward(x_NI, w_OI, resid_NO, y_NO);
  }
  void linear_dgrad(TensorView dy_NO, TensorView w_OI, TensorView dx_NI, Accumulate mode) const {
    gemm_table(KernelOp::linear, dy_NO.dtype(), dy_NO.size(0)).linear_dgrad(dy_NO, w_OI, dx_NI, mode);
  }
  void linear_wgrad(TensorView dy_NO, TensorView x_NI, TensorView dw_OI, TensorView db_O, Accumulate mode) const {
    gemm_table(KernelOp::linear, dy_NO.dtype(), dy_NO.size(0)).linear_wgrad(dy_NO, x_NI, dw_OI, db_O, mode);
  }
  void rmsnorm_forward(const RmsNormParams& p, TensorView x_NC, TensorView w_C, TensorView y_NC,
                       RmsNormSaved& saved) const {
    table(KernelOp::rmsnorm, x_NC.dtype()).rmsnorm_forward(p, x_NC, w_C, y_NC, saved);
  }
  void rmsnorm_backward(const RmsNormParams& p, TensorView dy_NC, TensorView x_NC, TensorView w_C,
                        const RmsNormSaved& saved, TensorView dx_NC, TensorView dw_C, Accumulate mode) const {
    table(KernelOp::rmsnorm, x_NC.dtype()).rmsnorm_backward(p, dy_NC, x_NC, w_C, saved, dx_NC, dw_C, mode);
  }
  void rope_forward(const RopeParams& p, TensorView pos_N, TensorView x_NHD) const {
    table(KernelOp::rope, x_NHD.dtype()).rope_forward(p, pos_N, x_NHD);
  }
  void rope_backward(const RopeParams& p, TensorView pos_N, TensorView dx_NHD) const {
    table(KernelOp::rope, dx_NHD.dtype()).rope_backward(p, pos_N, dx_NHD);
  }
  void attention_forward(const AttentionParams& p, TensorView q, TensorView k, TensorView v, TensorView out,
                         TensorView lse) const {
    table(KernelOp::attention, q.dtype()).attention_forward(p, q, k, v, out, lse);
  }
  void attention_backward(const AttentionParams& p, TensorView q, TensorView k, TensorView v, TensorView out,
                          TensorView lse, TensorView dout, TensorView dq, TensorView dk, TensorView dv) const {
    table(KernelOp::attention, q.dtype()).attention_backward(p, q, k, v, out, lse, dout, dq, dk, dv);
  }
  void attention_merge(TensorView part_out, TensorView part_lse, TensorView acc_out, TensorView acc_lse) const {
    table(KernelOp::attention, part_out.dtype()).attention_merge(part_out, part_lse, acc_out, acc_lse);
  }
  void swiglu_forward(TensorView gate_NF, TensorView up_NF, TensorView h_NF) const {
    table(KernelOp::swiglu, gate_NF.dtype()).swiglu_forward(gate_NF, up_NF, h_NF);
  }
  void swiglu_backward(TensorView gate_NF, TensorView up_NF, TensorView dh_NF, TensorView dgate_NF,
                       TensorView dup_NF) const {
    table(KernelOp::swiglu, gate_NF.dtype()).swiglu_backward(gate_NF, up_NF, dh_NF, dgate_NF, dup_NF);
  }
  void logprob_forward(const LogprobParams& p, TensorView logits_NV, TensorView targets_N, TensorView logp_N,
                       TensorView entropy_N, TensorView lse_N) const {
    table(KernelOp::logprob, logits_NV.dtype()).logprob_forward(p, logits_NV, targets_N, logp_N, entropy_N, lse_N);
  }
  void logprob_shard_stats(const LogprobParams& p, TensorView logits_NV, TensorView targets_N,
                           TensorView stats_N4) const {
    table(KernelOp::logprob, logits_NV.dtype()).logprob_shard_stats(p, logits_NV, targets_N, stats_N4);
  }
  void logprob_backward(const LogprobParams& p, TensorView logits_NV, TensorView targets_N, TensorView lse_N,
                        TensorView entropy_N, TensorView dlogp_N, TensorView dentropy_N, TensorView dlogits_NV) const {
    table(KernelOp::logprob, logits_NV.dtype())
        .logprob_backward(p, logits_NV, targets_N, lse_N, entropy_N, dlogp_N, dentropy_N, dlogits_NV);
  }
  void adamw_step(const AdamWParams& p, TensorView param, TensorView grad, TensorView exp_avg,
                  TensorView exp_avg_sq, TensorView param_copy) const {
    table(KernelOp::adamw, param.dtype()).adamw_step(p, param, grad, exp_avg, exp_avg_sq, param_copy);
  }
  double sum_squares(TensorView x) const { return table(KernelOp::grad_norm, x.dtype()).sum_squares(x); }
  void scale(TensorView x, double factor) const { table(KernelOp::grad_norm, x.dtype()).scale(x, factor); }
  void paged_attention_forward(const PagedAttentionParams& p, TensorView q_NHD, TensorView k_cache_PZKD,
                               TensorView v_cache_PZKD, TensorView out_NHD) const {
    table(KernelOp::paged_attention, q_NHD.dtype()).paged_attention_forward(p, q_NHD, k_cache_PZKD, v_cache_PZKD, out_NHD);
  }
  void kv_cache_write(TensorView k_NKD, TensorView v_NKD, TensorView slot_mapping_N, TensorView k_cache_PZKD,
                      TensorView v_cache_PZKD) const {
    table(KernelOp::paged_attention, k_cache_PZKD.dtype())
        .kv_cache_write(k_NKD, v_NKD, slot_mapping_N, k_cache_PZKD, v_cache_PZKD);
  }
  void moe_permute(TensorView tokens_NC, TensorView routing_map_NE, TensorView probs_NE, TensorView permuted_JC,
                   TensorView permuted_probs_J, TensorView sorted_indices_J, TensorView tokens_per_expert_E) const {
    table(KernelOp::moe, tokens_NC.dtype())
        .moe_permute(tokens_NC, routing_map_NE, probs_NE, permuted_JC, permuted_probs_J, sorted_indices_J,
                     tokens_per_expert_E);
  }
  void moe_unpermute(TensorView y_JC, TensorView sorted_indices_J, TensorView out_NC, Accumulate mode) const {
    table(KernelOp::moe, y_JC.dtype()).moe_unpermute(y_JC, sorted_indices_J, out_NC, mode);
  }
  void moe_gather(TensorView x_NC, TensorView sorted_indices_J, TensorView y_JC) const {
    table(KernelOp::moe, x_NC.dtype()).moe_gather(x_NC, sorted_indices_J, y_JC);
  }
  // The grouped GEMM runs on the many-rows f32 engine (f32_gemm) even when its groups are small: the
  // few-rows engine is picked for decode-sized calls, and a table has one engine for all its groups.
  void grouped_gemm_forward(TensorView x_NI, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                            TensorView y_NO) const {
    table(KernelOp::moe, x_NI.dtype()).grouped_gemm_forward(x_NI, w_EOI, group_sizes_E, y_NO);
  }
  void grouped_gemm_dgrad(TensorView dy_NO, TensorView w_EOI, std::span<const int64_t> group_sizes_E,
                          TensorView dx_NI, Accumulate mode) const {
    table(KernelOp::moe, dy_NO.dtype()).grouped_gemm_dgrad(dy_NO, w_EOI, group_sizes_E, dx_NI, mode);
  }
  void grouped_gemm_wgrad(TensorView dy_NO, TensorView x_NI, std::span<const int64_t> group_sizes_E,
                          TensorView dw_EOI, Accumulate mode) const {
    table(KernelOp::moe, dy_NO.dtype()).grouped_gemm_wgrad(dy_NO, x_NI, group_sizes_E, dw_EOI, mode);
  }

 private:
  const KernelTable& table_of(KernelVariant variant, GemmLibrary library) const;

  CpuFeatures features_;
  GemmLibrary f32_gemm_;
  GemmLibrary f32_gemm_few_rows_;
  GemmLibrary bf16_gemm_;
  bool batch_invariant_;
  std::array<std::array<const KernelTable*, kNumDTypes>, kNumKernelOps> choice_{};
  std::array<const KernelTable*, 2> few_rows_f32_{};  // gemm, linear: f32 calls of at most kFewRows rows
};

}  // namespace rf::kernels
