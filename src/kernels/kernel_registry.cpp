#include "kernels/kernel_registry.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "kernels/blas_info.h"

namespace rf::kernels {

std::string_view kernel_variant_name(KernelVariant variant) {
  switch (variant) {
    case KernelVariant::ref: return "ref";
    case KernelVariant::cpu_generic: return "cpu_generic";
    case KernelVariant::cpu_avx2: return "cpu_avx2";
    case KernelVariant::cpu_avx512: return "cpu_avx512";
  }
  return "?";
}

std::string_view gemm_library_name(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::onednn: return "onednn";
    case GemmLibrary::openblas: return "openblas";
    case GemmLibrary::ordered: return "ordered";
  }
  return "?";
}

GemmLibrary parse_gemm_library(std::string_view name) {
  for (GemmLibrary library : {GemmLibrary::onednn, GemmLibrary::openblas, GemmLibrary::ordered})
    if (gemm_library_name(library) == name) return library;
  throw ConfigError("kernels.f32_gemm",
                    fmt::format("unknown GEMM library '{}': expected onednn, openblas or ordered", name));
}

std::string_view kernel_op_name(KernelOp op) {
  switch (op) {
    case KernelOp::embedding: return "embedding";
    case KernelOp::gemm: return "gemm";
    case KernelOp::linear: return "linear";
    case KernelOp::rmsnorm: return "rmsnorm";
    case KernelOp::rope: return "rope";
    case KernelOp::attention: return "attention";
    case KernelOp::swiglu: return "swiglu";
    case KernelOp::logprob: return "logprob";
    case KernelOp::adamw: return "adamw";
    case KernelOp::grad_norm: return "grad_norm";
    case KernelOp::paged_attention: return "paged_attention";
    case KernelOp::moe: return "moe";
  }
  return "?";
}

KernelVariant parse_kernel_variant(std::string_view name) {
  for (int v = 0; v < kNumKernelVariants; ++v)
    if (kernel_variant_name(KernelVariant(v)) == name) return KernelVariant(v);
  throw ConfigError("kernels.variant",
                    fmt::format("unknown kernel variant '{}': expected ref, cpu_generic, cpu_avx2 or cpu_avx512", name));
}

KernelOp parse_kernel_op(std::string_view name) {
  for (int op = 0; op < kNumKernelOps; ++op)
    if (kernel_op_name(KernelOp(op)) == name) return KernelOp(op);
  throw ConfigError("kernels.overrides", fmt::format("unknown kernel op '{}'", name));
}

bool variant_supports(KernelVariant variant, DType dtype) {
  if (dtype == DType::f32 || dtype == DType::bf16) return true;
  return variant == KernelVariant::ref && dtype == DType::f64;
}

KernelRegistry::KernelRegistry(const KernelConfig& config, CpuFeatures features)
    : features_(features),
      f32_gemm_(config.batch_invariant ? GemmLibrary::ordered : config.f32_gemm),
      f32_gemm_few_rows_(config.batch_invariant ? GemmLibrary::ordered : config.f32_gemm_few_rows.value_or(config.f32_gemm)),
      bf16_gemm_(config.batch_invariant || !onednn_has_bf16_matmul() ? GemmLibrary::ordered : GemmLibrary::onednn),
      batch_invariant_(config.batch_invariant) {
  if (config.optimization_level < 0 || config.optimization_level > 2)
    throw ConfigError("kernels.optimization_level",
                      fmt::format("expected 0, 1 or 2, got {}", config.optimization_level));
  if (config.batch_invariant && config.f32_gemm != GemmLibrary::onednn && config.f32_gemm != GemmLibrary::ordered)
    core::log_warning("kernels.f32_gemm: {} has no effect on a batch-invariant registry (the rollout's): its linear "
                      "layers run on the ordered GEMM, whose rows do not depend on the batch",
                      gemm_library_name(config.f32_gemm));
  KernelVariant best = KernelVariant::ref;
  if (config.optimization_level > 0) {
    best = can_run(KernelVariant::cpu_avx512) ? KernelVariant::cpu_avx512
           : can_run(KernelVariant::cpu_avx2) ? KernelVariant::cpu_avx2
                                              : KernelVariant::cpu_generic;
  }
  if (config.force_variant) {
    if (!can_run(*config.force_variant))
      throw ConfigError("kernels.variant", fmt::format("this CPU cannot run {} (it has: {})",
                                                       kernel_variant_name(*config.force_variant),
                                                       features_.describe()));
    best = *config.force_variant;
  }
  std::array<KernelVariant, kNumKernelOps> per_op;
  per_op.fill(best);
  for (const auto& [op, variant] : config.overrides) {
    if (!can_run(variant))
      throw ConfigError(fmt::format("kernels.overrides.{}", kernel_op_name(op)),
                        fmt::format("this CPU cannot run {}", kernel_variant_name(variant)));
    per_op[size_t(op)] = variant;
  }
  for (int op = 0; op < kNumKernelOps; ++op) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const KernelVariant wanted = per_op[size_t(op)];
      const bool gemm_backed =
          KernelOp(op) == KernelOp::gemm || KernelOp(op) == KernelOp::linear || KernelOp(op) == KernelOp::moe;
      const GemmLibrary library = gemm_backed ? gemm_library(DType(d)) : GemmLibrary::onednn;
      choice_[size_t(op)][size_t(d)] =
          &table_of(variant_supports(wanted, DType(d)) ? wanted : KernelVariant::ref, library);
    }
  }
  few_rows_f32_[0] = &table_of(per_op[size_t(KernelOp::gemm)], f32_gemm_few_rows_);
  few_rows_f32_[1] = &table_of(per_op[size_t(KernelOp::linear)], f32_gemm_few_rows_);
}

bool KernelRegistry::can_run(KernelVariant variant) const {
  switch (variant) {
    case KernelVariant::ref:
    case KernelVariant::cpu_generic: return true;
    case KernelVariant::cpu_avx2: return features_.avx2 && features_.fma && features_.f16c;
    case KernelVariant::cpu_avx512:
      return features_.avx512f && features_.avx512bw && features_.avx512vl && features_.avx512dq &&
             features_.avx512_bf16 && features_.avx2 && features_.fma && features_.f16c;
  }
  return false;
}

const KernelTable& KernelRegistry::table_of(KernelVariant variant, GemmLibrary library) const {
  auto pick = [library](const KernelTable& onednn, const KernelTable& openblas,
                        const KernelTable& ordered) -> const KernelTable& {
    switch (library) {
      case GemmLibrary::onednn: return onednn;
      case GemmLibrary::openblas: return openblas;
      case GemmLibrary::ordered: return ordered;
    }
    return onednn;
  };
  switch (variant) {
    case KernelVariant::ref: return ref::table();
    case KernelVariant::cpu_generic:
      return pick(cpu_generic::table(), cpu_generic::openblas_table(), cpu_generic::ordered_table());
    case KernelVariant::cpu_avx2: return pick(cpu_avx2::table(), cpu_avx2::openblas_table(), cpu_avx2::ordered_table());
    case KernelVariant::cpu_avx512:
      return pick(cpu_avx512::table(), cpu_avx512::openblas_table(), cpu_avx512::ordered_table());
  }
  return ref::table();
}

const KernelTable& KernelRegistry::table(KernelOp op, DType dtype) const {
  const KernelTable* t = choice_[size_t(op)][size_t(dtype)];
  RF_CHECK(t != nullptr, "no kernel for {} in {}", kernel_op_name(op), dtype_name(dtype));
  return *t;
}

std::string KernelRegistry::describe() const {
  auto ops_of = [this](DType dtype) {
    std::string ops;
    for (int op = 0; op < kNumKernelOps; ++op)
      ops += fmt::format("{}{}={}", op ? " " : "", kernel_op_name(KernelOp(op)),
                         kernel_variant_name(choice_[size_t(op)][size_t(dtype)]->variant));
    return ops;
  };
  const bool bf16_without_onednn = bf16_gemm_ == GemmLibrary::ordered && !batch_invariant_;
  const std::string bf16_why = bf16_without_onednn ? " (oneDNN has no bf16 kernel below avx512_core)" : "";
  const std::string few_rows = f32_gemm_few_rows_ == f32_gemm_
                                   ? ""
                                   : fmt::format(" ({} at <= {} rows)", gemm_library_name(f32_gemm_few_rows_), kFewRows);
  return fmt::format("cpu: {}\nkernels f32: {}\nkernels bf16: {}\ngemm: f32 on {}{}, bf16 on {}{}{}\nblas: {}",
                     features_.describe(), ops_of(DType::f32), ops_of(DType::bf16), gemm_library_name(f32_gemm_),
                     few_rows, gemm_library_name(bf16_gemm_), bf16_why, batch_invariant_ ? " (batch-invariant)" : "",
                     blas_info());
}

}  // namespace rf::kernels
