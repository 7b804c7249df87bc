#include "kernels/kernel_registry.h"

#include <gtest/gtest.h>

namespace rf::kernels {
namespace {

TEST(KernelRegistry, LevelZeroRunsEverythingOnRef) {
  const KernelRegistry registry(KernelConfig{.optimization_level = 0});
  for (int op = 0; op < kNumKernelOps; ++op)
    for (DType dtype : {DType::f32, DType::bf16, DType::f64})
      EXPECT_EQ(registry.variant(KernelOp(op), dtype), KernelVariant::ref) << kernel_op_name(KernelOp(op));
}

TEST(KernelRegistry, PicksTheBestVariantThisCpuRunsAndRefForF64) {
  const KernelRegistry registry;
  const KernelVariant expected = registry.can_run(KernelVariant::cpu_avx512) ? KernelVariant::cpu_avx512
                                 : registry.can_run(KernelVariant::cpu_avx2) ? KernelVariant::cpu_avx2
                                                                             : KernelVariant::cpu_generic;
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f32), expected);
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::bf16), expected);
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f64), KernelVariant::ref);
}

TEST(KernelRegistry, MachineWithoutAvx512FallsBackToAvx2) {
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = true;
  const KernelRegistry registry({}, avx2_only);
  EXPECT_EQ(registry.variant(KernelOp::attention, DType::f32), KernelVariant::cpu_avx2);
  EXPECT_THROW(KernelRegistry(KernelConfig{.force_variant = KernelVariant::cpu_avx512}, avx2_only), ConfigError);
  EXPECT_EQ(KernelRegistry({}, CpuFeatures{}).variant(KernelOp::attention, DType::f32), KernelVariant::cpu_generic);
}

TEST(KernelRegistry, ForcesAVariantAndOverridesSingleOps) {
  const KernelRegistry registry(KernelConfig{.force_variant = KernelVariant::cpu_generic,
                                             .overrides = {{KernelOp::attention, KernelVariant::ref}}});
  EXPECT_EQ(registry.variant(KernelOp::rmsnorm, DType::f32), KernelVariant::cpu_generic);
  EXPECT_EQ(registry.variant(KernelOp::attention, DType::f32), KernelVariant::ref);
  EXPECT_NE(registry.describe().find("attention=ref"), std::string::npos) << registry.describe();
}

TEST(KernelRegistry, F32GemmLibraryChangesOnlyTheF32GemmBackedOps) {
  const KernelRegistry onednn, openblas(KernelConfig{.f32_gemm = GemmLibrary::openblas});
  for (KernelOp op : {KernelOp::gemm, KernelOp::linear}) {
    EXPECT_NE(&onednn.table(op, DType::f32), &openblas.table(op, DType::f32)) << kernel_op_name(op);
    EXPECT_EQ(&onednn.table(op, DType::bf16), &openblas.table(op, DType::bf16)) << kernel_op_name(op);
    EXPECT_EQ(onednn.variant(op, DType::f32), openblas.variant(op, DType::f32)) << kernel_op_name(op);
  }
  EXPECT_NE(onednn.table(KernelOp::linear, DType::f32).linear_forward,
            openblas.table(KernelOp::linear, DType::f32).linear_forward);
  EXPECT_EQ(&onednn.table(KernelOp::rmsnorm, DType::f32), &openblas.table(KernelOp::rmsnorm, DType::f32));
  EXPECT_NE(openblas.describe().find("f32 gemm: openblas"), std::string::npos) << openblas.describe();
  EXPECT_EQ(parse_gemm_library("openblas"), GemmLibrary::openblas);
  try {
    parse_gemm_library("mkl");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "kernels.f32_gemm");
  }
}

TEST(KernelRegistry, RejectsBadConfigNamingTheKey) {
  try {
    KernelRegistry(KernelConfig{.optimization_level = 3});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "kernels.optimization_level");
  }
  EXPECT_THROW(parse_kernel_variant("cuda"), ConfigError);
  EXPECT_EQ(parse_kernel_variant("cpu_avx2"), KernelVariant::cpu_avx2);
  EXPECT_EQ(parse_kernel_op("logprob"), KernelOp::logprob);
}

}  // namespace
}  // namespace rf::kernels
