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
  return library == GemmLibrary::onednn ? "onednn" : "openblas";
}

GemmLibrary parse_gemm_library(std::string_view name) {
  for (GemmLibrary library : {GemmLibrary::onednn, GemmLibrary::openblas})
    if (gemm_library_name(library) == name) return library;
  throw ConfigError("kernels.f32_gemm", fmt::format("unknown GEMM library '{}': expected onednn or openblas", name));
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
      f32_gemm_(config.batch_invariant ? GemmLibrary::onednn : config.f32_gemm),
      batch_invariant_(config.batch_invariant) {
  if (config.optimization_level < 0 || config.optimization_level > 2)
    throw ConfigError("kernels.optimization_level",
                      fmt::format("expected 0, 1 or 2, got {}", config.optimization_level));
  if (config.batch_invariant && config.f32_gemm == GemmLibrary::openblas)
    core::log_warning("kernels.f32_gemm: openblas has no effect on a batch-invariant registry (the rollout's): its "
                      "f32 linear layers run on onednn, whose rows do not depend on the batch");
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
      const bool gemm_backed = KernelOp(op) == KernelOp::gemm || KernelOp(op) == KernelOp::linear;
      const GemmLibrary library = gemm_backed && DType(d) == DType::f32 ? f32_gemm_ : GemmLibrary::onednn;
      choice_[size_t(op)][size_t(d)] =
          &table_of(variant_supports(wanted, DType(d)) ? wanted : KernelVariant::ref, library);
    }
  }
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

const KernelTable& KernelRegistry::table_of(KernelVariant variant, GemmLibrary f32_gemm) const {
  const bool openblas = f32_gemm == GemmLibrary::openblas;
  switch (variant) {
    case KernelVariant::ref: return ref::table();
    case KernelVariant::cpu_generic: return openblas ? cpu_generic::openblas_table() : cpu_generic::table();
    case KernelVariant::cpu_avx2: return openblas ? cpu_avx2::openblas_table() : cpu_avx2::table();
    case KernelVariant::cpu_avx512: return openblas ? cpu_avx512::openblas_table() : cpu_avx512::table();
  }
  return ref::table();
}

const KernelTable& KernelRegistry::table(KernelOp op, DType dtype) const {
  const KernelTable* t = choice_[size_t(op)][size_t(dtype)];
  RF_CHECK(t != nullptr, "no kernel for {} in {}", kernel_op_name(op), dtype_name(dtype));
  return *t;
}

std::string KernelRegistry::describe() const {
  std::string ops;
  for (int op = 0; op < kNumKernelOps; ++op)
    ops += fmt::format("{}{}={}", op ? " " : "", kernel_op_name(KernelOp(op)),
                       kernel_variant_name(choice_[size_t(op)][size_t(DType::f32)]->variant));
  return fmt::format("cpu: {}\nkernels (f32/bf16): {}\nf32 gemm: {}{}; blas: {}", features_.describe(), ops,
                     gemm_library_name(f32_gemm_), batch_invariant_ ? " (batch-invariant)" : "", blas_info());
}

}  // namespace rf::kernels
